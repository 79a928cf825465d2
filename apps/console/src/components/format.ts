/** Credits are US cents: "$0.45/h" for 45 credits an hour. */
export const dollarsPerHour = (cents: number) => `$${(cents / 100).toFixed(cents % 1 === 0 && cents % 100 === 0 ? 0 : 2)}/h`;

export const gigabytes = (mb: number) => `${Math.round(mb / 1024)} GB`;
