import qrcode from "qrcode-generator";

// Dark modules as spaces and light ones as blocks: on the dark background most terminals
// have, the blocks draw the light paper a phone's scanner expects (as `qrencode -t UTF8`).
// Two rows of modules per line of text, so the code stays near square and fits 80 columns.
const CELL: Record<string, string> = { "00": " ", "10": "▀", "01": "▄", "11": "█" };
/** The spec's quiet zone: four light modules around the code. */
const QUIET_ZONE = 4;

/** `text` as a QR code (error correction L, the smallest) drawn with Unicode half blocks, a line of text per two rows of modules. */
export function qrText(text: string): string[] {
  const code = qrcode(0, "L");
  code.addData(text, "Byte");
  code.make();
  const size = code.getModuleCount();
  const light = (row: number, col: number) => (row < 0 || col < 0 || row >= size || col >= size || !code.isDark(row, col) ? "1" : "0");
  const lines: string[] = [];
  for (let row = -QUIET_ZONE; row < size + QUIET_ZONE; row += 2) {
    let line = "";
    for (let col = -QUIET_ZONE; col < size + QUIET_ZONE; col++) line += CELL[light(row, col) + light(row + 1, col)];
    lines.push(line);
  }
  return lines;
}
