// The slice of dockerode the network sandbox pool (src/runtime/sandboxes.ts)
// calls, in memory. The pool sits below the ContainerRuntime port, inside
// DockerRuntime, so this is the one place a fake stands in for dockerode: the
// pool's bookkeeping (fill, take, refill, adopt, notice what an operator
// removed) is logic worth testing without an engine; what Docker does with the
// options is tested against real Docker (sandboxes*.test.ts).
//
// With a seed, each call answers after a seeded random delay (real timers), so
// many interleavings can be tried and a failing one replays exactly. Without,
// calls answer at once, and the pool's own timers are all that moves time.
import type Docker from "dockerode";

export interface MemoryDockerContainer {
  name: string;
  image: string;
  labels: Record<string, string>;
  createdS: number;
  /** "exited": stopped by an operator, or the host rebooted */
  state: "created" | "running" | "exited";
  starts: number;
}

export interface MemoryDockerNetwork {
  labels: Record<string, string>;
  created: string;
  /** Docker's driver options, e.g. the bridge's interface name */
  options?: Record<string, string>;
}

const notFound = (what: string) => Object.assign(new Error(`(HTTP code 404) no such ${what}`), { statusCode: 404 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function memoryDocker(options: { seed?: number; architecture?: string } = {}) {
  let state = options.seed ?? 0;
  const random = () => {
    // mulberry32
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const delay = async () => {
    if (options.seed !== undefined) await sleep(Math.floor(random() * 8));
  };
  const containers = new Map<string, MemoryDockerContainer>();
  const networks = new Map<string, MemoryDockerNetwork>();
  const images = new Set<string>();
  /** what must never happen, whatever the interleaving */
  const problems: string[] = [];
  const matches = (labels: Record<string, string>, filters: string[]) =>
    filters.every((filter) => {
      const [key, value] = filter.split("=") as [string, string | undefined];
      return value === undefined ? key in labels : labels[key] === value;
    });
  const docker = {
    info: async () => ({ Architecture: options.architecture ?? "x86_64" }),
    getImage: (ref: string) => ({
      inspect: async () => {
        if (!images.has(ref)) throw notFound("image");
        return {};
      },
    }),
    // Answers at once even with a seed: a seed replays the same orderings whether or not the image was made first.
    importImage: async (_archive: unknown, { repo, tag }: { repo: string; tag: string }) => {
      images.add(`${repo}:${tag}`);
      return {};
    },
    modem: { followProgress: (_stream: unknown, onFinished: (error: Error | null, events: unknown[]) => void) => onFinished(null, []) },
    createNetwork: async (options: { Name: string; Labels: Record<string, string>; Options?: Record<string, string> }) => {
      await delay();
      networks.set(options.Name, { labels: options.Labels, created: new Date().toISOString(), ...(options.Options ? { options: options.Options } : {}) });
    },
    createContainer: async (options: { name: string; Image: string; Labels: Record<string, string> }) => {
      await delay();
      if (!images.has(options.Image)) throw notFound(`image: ${options.Image}`);
      const container: MemoryDockerContainer = {
        name: options.name,
        image: options.Image,
        labels: options.Labels,
        createdS: Math.floor(Date.now() / 1000),
        state: "created",
        starts: 0,
      };
      containers.set(options.name, container);
      return {
        start: async () => {
          await delay();
          if (containers.get(options.name) !== container) throw notFound("container");
          container.starts += 1;
          if (container.starts > 1) problems.push(`${container.name} started twice`);
          container.state = "running";
        },
      };
    },
    getContainer: (name: string) => ({
      inspect: async () => {
        await delay();
        const container = containers.get(name);
        if (!container) throw notFound("container");
        const running = container.state === "running";
        return { State: { Running: running }, NetworkSettings: { Networks: { [name]: { IPAddress: running ? "10.0.0.2" : "" } } } };
      },
      remove: async () => {
        await delay();
        const container = containers.get(name);
        if (!container) throw notFound("container");
        if (container.state === "created") problems.push(`${name} removed while its maker was starting it`);
        containers.delete(name);
      },
      wait: async () => {},
    }),
    getNetwork: (name: string) => ({
      remove: async () => {
        await delay();
        if (!networks.delete(name)) throw notFound("network");
      },
    }),
    listContainers: async (options: { filters: { label: string[] } }) => {
      await delay();
      return [...containers.values()]
        .filter((c) => matches(c.labels, options.filters.label))
        .map((c) => ({ Names: [`/${c.name}`], Labels: c.labels, State: c.state, Created: c.createdS }));
    },
    listNetworks: async (options: { filters: { label: string[] } }) => {
      await delay();
      return [...networks]
        .filter(([, n]) => matches(n.labels, options.filters.label))
        .map(([Name, n]) => ({ Name, Labels: n.labels, Created: n.created, Options: n.options ?? {} }));
    },
  };
  return { docker: docker as unknown as Docker, containers, networks, images, problems, random };
}
