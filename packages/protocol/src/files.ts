import { z } from "zod";

/**
 * A path of a deployment's container read out as a tar archive (`cm cp ID:PATH
 * LOCAL`): `GET /deployments/{id}/files?path=` answers `application/x-tar`,
 * running or not, as Docker's `GET /containers/{id}/archive?path=` does and
 * with its naming (the archive's top entry is the path's last name, or `.` for
 * a path ending in `/.`: the directory's contents). The node's agent reads it
 * with the engine's archive API, which needs no tar, shell or running process
 * in the container, and carries it on a tunnel connection of its own (as a
 * public endpoint's bytes travel).
 */

/** The media type of the answer. */
export const FILES_MEDIA_TYPE = "application/x-tar";

/** Linux's PATH_MAX: a longer path names nothing in the container. */
export const FILES_PATH_MAX = 4096;

/**
 * An absolute path in the container, storable text (no NUL, no unpaired
 * surrogate); "." and ".." are the engine's to resolve, inside the container's
 * root only.
 */
export const FilesPath = z
  .string()
  .max(FILES_PATH_MAX)
  .regex(/^\/(?:[^\0\uD800-\uDFFF]|[\uD800-\uDBFF][\uDC00-\uDFFF])*$/, "must be an absolute path in the container (starting with /), with no NUL");

/**
 * Reads one deployment may have open at once: one. The engine (Docker 20.10
 * measured) holds the container's lock for as long as an archive is read, so a
 * second read would wait on the engine unseen until the first ended (past the
 * control plane's wait for the node), and an exec into a running container
 * waits too (cm cp reads a running container through exec, for that). The next
 * read is refused with RATE_LIMITED while one is open.
 */
export const FILES_MAX_READS_PER_DEPLOYMENT = 1;

/**
 * Why an agent could not read a path (the `code` of its `tunnel_error` for an
 * `open_archive`): nothing at the path, no container of the deployment on the
 * node, or the engine failed.
 */
export const ARCHIVE_ERROR_CODES = ["PATH_NOT_FOUND", "NO_CONTAINER", "ARCHIVE_FAILED"] as const;
export const ArchiveErrorCode = z.enum(ARCHIVE_ERROR_CODES);
export type ArchiveErrorCode = z.infer<typeof ArchiveErrorCode>;
