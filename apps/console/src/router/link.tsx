import type { AnchorHTMLAttributes, MouseEvent } from "react";
import { BASE, navigate } from "./router";

/** A link inside the console: a real <a href> (open in a new tab, copy the address), followed without a reload. */
export function Link({ to, onClick, ...rest }: { to: string } & Omit<AnchorHTMLAttributes<HTMLAnchorElement>, "href">) {
  const follow = (e: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(e);
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return <a href={BASE + to} onClick={follow} {...rest} />;
}
