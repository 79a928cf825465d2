/** The middle value (the upper middle of an even count): what each benchmark compares across rounds. */
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
