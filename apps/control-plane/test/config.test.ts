import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config";
import { sharedCookieScope } from "../src/http/cookie-scope";

describe("loadConfig", () => {
  it("refuses endpoints on the API's registrable domain, saying why", () => {
    expect(() => loadConfig({ PUBLIC_DOMAIN: "gpu.example.com", GATEWAY_DOMAIN: "gpu.example.com" })).toThrow(
      /GATEWAY_DOMAIN: endpoints under gpu\.example\.com and the API at gpu\.example\.com share the registrable domain example\.com, so a tenant's page could set cookies the API receives/,
    );
    expect(() => loadConfig({ PUBLIC_DOMAIN: "cloud.example.com:8443", GATEWAY_DOMAIN: "gpu.example.com" })).toThrow(
      /share the registrable domain example\.com/,
    );
    // Public-suffix rules decide, not the last two labels.
    expect(() => loadConfig({ PUBLIC_DOMAIN: "console.example.co.uk", GATEWAY_DOMAIN: "gpu.example.co.uk" })).toThrow(/registrable domain example\.co\.uk/);
  });

  it("takes endpoints on a domain of their own, and the local defaults", () => {
    expect(loadConfig({ PUBLIC_DOMAIN: "cloud.example.com", GATEWAY_DOMAIN: "example-gpu.net" }).GATEWAY_DOMAIN).toBe("example-gpu.net");
    expect(loadConfig({}).GATEWAY_DOMAIN).toBe("localhost");
    expect(loadConfig({ PUBLIC_DOMAIN: "localhost:8080" }).PUBLIC_DOMAIN).toBe("localhost:8080");
  });

  it("refuses a TRUSTED_PROXIES entry that is no address or range", () => {
    expect(() => loadConfig({ TRUSTED_PROXIES: "127.0.0.1, nginx" })).toThrow(/TRUSTED_PROXIES: "nginx" is not an IP address or a CIDR range/);
    expect(loadConfig({ TRUSTED_PROXIES: "127.0.0.1, 10.0.0.0/8" }).TRUSTED_PROXIES).toBe("127.0.0.1, 10.0.0.0/8");
  });
});

describe("sharedCookieScope", () => {
  it("reads the private section of the Public Suffix List: endpoints under a listed platform domain share nothing", () => {
    // herokuapp.com is a public suffix: each app under it is a registrable domain of its own.
    expect(sharedCookieScope("console.herokuapp.com", "herokuapp.com")).toBeUndefined();
    expect(sharedCookieScope("[::1]:8080", "localhost")).toBeUndefined();
    expect(sharedCookieScope("127.0.0.1:8080", "localhost")).toBeUndefined();
  });
});
