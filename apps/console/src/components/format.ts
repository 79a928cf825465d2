/** Credits are US cents: "$0.45/h" for 45 credits an hour. */
export const dollarsPerHour = (cents: number) => `$${(cents / 100).toFixed(2)}/h`;

export const gigabytes = (mb: number) => `${Math.round(mb / 1024)} GB`;
