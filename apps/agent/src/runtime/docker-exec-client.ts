import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import type { ExecClient, ExecOptions, ExecProcess } from "./container-runtime";
import { createFrameDecoder } from "./docker-frames";
import { ContainerNotFoundError, dockerStatusCode } from "./errors";
import { hangUpExec, hostHangUpDeps } from "./exec-hangup";
import type { RuntimeLogger } from "./logger";

/** How long the engine may take to mark an exec as ended after its streams closed. */
const EXIT_POLL_MS = 50;
const EXIT_POLL_TRIES = 100;

/** docker exec over the engine's API: a hijacked connection carries stdin one way and output the other. */
export class DockerExecClient implements ExecClient {
  constructor(
    private readonly docker: Docker,
    private readonly logger: RuntimeLogger,
  ) {}

  async exec(containerId: string, options: ExecOptions): Promise<ExecProcess> {
    const container = this.docker.getContainer(containerId);
    this.logger.debug("Creating exec", { containerId, command: options.command, tty: options.tty });
    let exec: Docker.Exec;
    try {
      exec = await container.exec({ Cmd: options.command, AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: options.tty });
    } catch (error) {
      if (dockerStatusCode(error) === 404) throw new ContainerNotFoundError(containerId);
      throw error;
    }
    const stream = (await exec.start({ hijack: true, stdin: true, Tty: options.tty })) as Duplex;
    this.logger.debug("Exec started", { containerId, execId: exec.id });
    // The tty starts at 0x0 (programs such as stty and vi then fail) until it is sized.
    if (options.tty && options.cols && options.rows) await exec.resize({ w: options.cols, h: options.rows }).catch(() => undefined);

    // Without a tty the engine multiplexes stdout and stderr into one stream of frames.
    const decoder = options.tty ? undefined : createFrameDecoder();
    stream.on("data", (chunk: Buffer) => {
      if (!decoder) return options.onOutput("stdout", chunk);
      for (const frame of decoder.push(chunk)) options.onOutput(frame.stream, frame.payload);
    });
    const ended = new Promise<void>((resolve) => {
      stream.once("end", resolve);
      stream.once("close", resolve);
      stream.once("error", (error) => {
        this.logger.warn("Exec stream failed", { containerId, execId: exec.id, error: error.message });
        resolve();
      });
    });
    const exit = ended.then(() => this.exitCode(exec));
    let detached: Promise<void> | undefined;
    return {
      write: (chunk) => (stream.writable ? stream.write(chunk) : true),
      drained: () =>
        new Promise<void>((resolve) => {
          if (!stream.writableNeedDrain || stream.destroyed) return resolve();
          const done = () => {
            stream.off("drain", done);
            stream.off("close", done);
            resolve();
          };
          stream.on("drain", done);
          stream.on("close", done);
        }),
      // A half-close: the engine closes the command's stdin and keeps sending its output.
      endStdin: () => {
        if (stream.writable) stream.end();
      },
      resize: async (cols, rows) => {
        await exec.resize({ w: cols, h: rows });
      },
      pauseOutput: () => stream.pause(),
      resumeOutput: () => stream.resume(),
      exit,
      detach: () => {
        detached ??= (async () => {
          stream.destroy();
          if (!options.tty) await this.hangUp(containerId, exec);
        })();
        return detached;
      },
    };
  }

  /** A command without a tty whose client left: see exec-hangup.ts. */
  private async hangUp(containerId: string, exec: Docker.Exec): Promise<void> {
    const info = await exec.inspect().catch(() => undefined);
    if (!info?.Running || !info.Pid) return;
    const running = async () => (await exec.inspect().catch(() => undefined))?.Running ?? false;
    const outcome = await hangUpExec(info.Pid, info.ContainerID, hostHangUpDeps(running)).catch((error: Error) => error.message);
    this.logger.debug("Exec client left: command hung up", { containerId, execId: exec.id, outcome });
  }

  /** The engine can report the streams' end a moment before the process's: ask until it has an exit code. */
  private async exitCode(exec: Docker.Exec): Promise<number> {
    for (let i = 0; i < EXIT_POLL_TRIES; i++) {
      const info = await exec.inspect().catch(() => undefined);
      if (info && !info.Running && info.ExitCode !== null) return info.ExitCode;
      await new Promise((r) => setTimeout(r, EXIT_POLL_MS));
    }
    return -1;
  }
}
