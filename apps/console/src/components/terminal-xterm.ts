/**
 * xterm.js wired to a running command: loaded only by import() when a terminal is opened,
 * so xterm stays out of the console's initial JavaScript.
 */
import "@xterm/xterm/css/xterm.css";
import type { ExecSession } from "@cm/sdk";
import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";

export interface TerminalHandle {
  dispose(): void;
  focus(): void;
}

/**
 * xterm writes the CSS it computes (cell sizes, theme) into <style> elements, which the
 * console's CSP (style-src 'self', nothing inline) refuses. While a terminal is open, a
 * <style> asked for is an inert <template> whose text goes into a constructed stylesheet
 * adopted by the document: CSSOM, which the CSP allows.
 */
let shimUsers = 0;
let restoreShim: (() => void) | undefined;
function cspSafeStyles(): () => void {
  if (shimUsers++ === 0) {
    const original = Document.prototype.createElement;
    const sheets = new Set<CSSStyleSheet>();
    Document.prototype.createElement = function (this: Document, tag: string, options?: ElementCreationOptions) {
      if (tag.toLowerCase() !== "style") return original.call(this, tag, options);
      // Not a <style> at all: the CSP checks even an empty one put in the page. xterm only sets its text and removes it.
      const el = original.call(this, "template");
      const sheet = new CSSStyleSheet();
      sheets.add(sheet);
      this.adoptedStyleSheets = [...this.adoptedStyleSheets, sheet];
      let text = "";
      Object.defineProperty(el, "textContent", {
        get: () => text,
        set: (v: string) => {
          text = v ?? "";
          sheet.replaceSync(text);
        },
      });
      el.remove = () => {
        sheets.delete(sheet);
        this.adoptedStyleSheets = this.adoptedStyleSheets.filter((s) => s !== sheet);
        Element.prototype.remove.call(el);
      };
      return el;
    } as typeof Document.prototype.createElement;
    // A cell in a 24-bit colour gets it by setAttribute("style"), which the CSP refuses too; the
    // same text through the element's CSSOM style is allowed, and means the same.
    const setAttribute = Element.prototype.setAttribute;
    Element.prototype.setAttribute = function (this: Element, name: string, value: string) {
      if (name === "style" && (this instanceof HTMLElement || this instanceof SVGElement)) this.style.cssText = value;
      else setAttribute.call(this, name, value);
    };
    restoreShim = () => {
      Document.prototype.createElement = original;
      Element.prototype.setAttribute = setAttribute;
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => !sheets.has(s));
    };
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--shimUsers === 0) restoreShim?.();
  };
}

/**
 * A terminal in `host` for a tty session opened by `open` (given the terminal's size):
 * keys go to the command's stdin, its output to the screen, and a resize of the host
 * (the window, a phone turned) resizes the tty.
 */
export function openTerminal(
  host: HTMLElement,
  open: (size: { cols: number; rows: number }, onOutput: (data: Uint8Array) => void) => ExecSession,
  onEnd: (message: string) => void,
): TerminalHandle {
  const releaseShim = cspSafeStyles();
  const term = new Terminal({
    cursorBlink: true,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
    fontSize: 14,
    scrollback: 5_000,
    theme: { background: "#111318", foreground: "#ececec" },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(host);
  fit.fit();
  const session = open({ cols: term.cols, rows: term.rows }, (data) => term.write(data));
  const input = term.onData((data) => session.write(data));
  const resized = term.onResize(({ cols, rows }) => session.resize(cols, rows));
  let frame: number | undefined;
  const observer = new ResizeObserver(() => {
    // One fit per frame however many resize notices come.
    if (frame === undefined)
      frame = requestAnimationFrame(() => {
        frame = undefined;
        fit.fit();
      });
  });
  observer.observe(host);
  session.exit.then(
    (code) => onEnd(`The shell exited with code ${code}.`),
    (err: unknown) => onEnd(err instanceof Error ? err.message : String(err)),
  );
  term.focus();
  return {
    focus: () => term.focus(),
    dispose() {
      observer.disconnect();
      if (frame !== undefined) cancelAnimationFrame(frame);
      input.dispose();
      resized.dispose();
      session.close();
      term.dispose();
      releaseShim();
    },
  };
}
