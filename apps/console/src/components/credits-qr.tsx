import { useEffect, useState } from "react";

/**
 * A QR code of `text` drawn as SVG from qrcode-generator's modules: one path, no inline style
 * or script (the CSP allows neither). The generator is loaded when the first code is drawn, so
 * it is not in the console's initial JavaScript.
 */
export function QrCode({ text, label }: { text: string; label: string }) {
  const [path, setPath] = useState<{ d: string; size: number } | undefined>();
  useEffect(() => {
    let current = true;
    void import("qrcode-generator").then(({ default: qrcode }) => {
      // M: a phone's camera reads it from a screen at arm's length; a transfer request fits at version 10 or so.
      const qr = qrcode(0, "M");
      qr.addData(text, "Byte");
      qr.make();
      const n = qr.getModuleCount();
      let d = "";
      for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) if (qr.isDark(r, c)) d += `M${c + 4} ${r + 4}h1v1h-1z`;
      if (current) setPath({ d, size: n + 8 });
    });
    return () => {
      current = false;
    };
  }, [text]);
  if (!path) return <div className="credits-qr credits-qr-pending" aria-busy="true" />;
  return (
    <svg className="credits-qr" viewBox={`0 0 ${path.size} ${path.size}`} role="img" aria-label={label} shapeRendering="crispEdges">
      <rect width={path.size} height={path.size} fill="#ffffff" />
      <path d={path.d} fill="#000000" />
    </svg>
  );
}
