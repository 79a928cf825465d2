import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import type Docker from "dockerode";
import { SANDBOX_PROGRAM_PATH } from "./create-options";
import { dockerStatusCode } from "./errors";
import type { RuntimeLogger } from "./logger";
import { isSandboxArch, pauseProgram, singleFileTar } from "./sandbox-program";
import { NOT_FOUND } from "./sandbox-settings";

const SANDBOX_IMAGE_REPO = "cm-sandbox";

/** The sandbox image, made locally from the pause program (no registry needed) the first time it is asked for. */
export class SandboxImage {
  private image: Promise<string> | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly logger: RuntimeLogger,
  ) {}

  get(): Promise<string> {
    this.image ??= this.make().catch((error: unknown) => {
      this.image = undefined; // try again next time
      throw error;
    });
    return this.image;
  }

  /** It was removed (an operator's `docker image prune`): made again when next asked for. */
  forget(): void {
    this.image = undefined;
  }

  private async make(): Promise<string> {
    const arch = ((await this.docker.info()) as { Architecture?: string }).Architecture ?? "";
    if (!isSandboxArch(arch)) throw new Error(`this agent runs containers on x86_64 and aarch64 Docker engines; this one is "${arch}"`);
    const program = pauseProgram(arch);
    const tag = createHash("sha256").update(program).digest("hex").slice(0, 12);
    const ref = `${SANDBOX_IMAGE_REPO}:${tag}`;
    try {
      await this.docker.getImage(ref).inspect();
      return ref;
    } catch (error) {
      if (dockerStatusCode(error) !== NOT_FOUND) throw error;
    }
    this.logger.debug("Making the sandbox image", { ref, arch });
    const archive = Readable.from([singleFileTar(SANDBOX_PROGRAM_PATH.slice(1), program)]);
    const stream = await this.docker.importImage(archive, { repo: SANDBOX_IMAGE_REPO, tag });
    await new Promise<void>((resolve, reject) => {
      this.docker.modem.followProgress(stream, (error: Error | null, events: Array<{ error?: string }>) => {
        const failure = error?.message ?? events.find((event) => event.error)?.error;
        if (failure) reject(new Error(`could not make the sandbox image: ${failure}`));
        else resolve();
      });
    });
    return ref;
  }
}
