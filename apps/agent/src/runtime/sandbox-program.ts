// The one program a sandbox container runs: block forever, do nothing. It only
// holds a network namespace open so a tenant's container can join it
// (Kubernetes' "pause" container plays the same part). We write the ELF here
// rather than ship a binary or pull an image: nodes may have no registry, and
// 130 bytes of machine code need no toolchain. Pure; tested byte for byte and
// by running it (x86-64 natively, aarch64 under qemu where installed).

/** Docker's `Architecture` (uname -m) values we can build the program for. */
export type SandboxArch = "x86_64" | "aarch64";

const ELF_MACHINE: Record<SandboxArch, number> = { x86_64: 62, aarch64: 183 };

/**
 * x86-64:  loop: mov eax, 34 (pause); syscall; jmp loop
 * aarch64: loop: mov x8, 73 (ppoll); x0..x3 = 0; svc 0; b loop  (ppoll with no
 *          fds and no timeout sleeps until a signal, like pause, which arm64 lacks)
 * Both return to the loop if a signal is caught; SIGTERM/SIGKILL end the process.
 */
const CODE: Record<SandboxArch, Buffer> = {
  x86_64: Buffer.from([0xb8, 0x22, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xeb, 0xf7]),
  aarch64: words([0xd2800928, 0xd2800000, 0xd2800001, 0xd2800002, 0xd2800003, 0xd4000001, 0x17fffffa]),
};

const LOAD_ADDRESS = 0x400000n;
const ELF_HEADER_SIZE = 64;
const PROGRAM_HEADER_SIZE = 56;

export function isSandboxArch(arch: string): arch is SandboxArch {
  return arch in ELF_MACHINE;
}

/** A static ELF64 little-endian executable: one read+execute segment, entry right after the headers. */
export function pauseProgram(arch: SandboxArch): Buffer {
  const code = CODE[arch];
  const codeOffset = ELF_HEADER_SIZE + PROGRAM_HEADER_SIZE;
  const elf = Buffer.alloc(codeOffset + code.length);
  // e_ident: magic, 64-bit, little-endian, version 1, System V ABI
  elf.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0], 0);
  elf.writeUInt16LE(2, 16); // e_type: executable
  elf.writeUInt16LE(ELF_MACHINE[arch], 18);
  elf.writeUInt32LE(1, 20); // e_version
  elf.writeBigUInt64LE(LOAD_ADDRESS + BigInt(codeOffset), 24); // e_entry
  elf.writeBigUInt64LE(BigInt(ELF_HEADER_SIZE), 32); // e_phoff
  elf.writeBigUInt64LE(0n, 40); // e_shoff: no sections
  elf.writeUInt32LE(0, 48); // e_flags
  elf.writeUInt16LE(ELF_HEADER_SIZE, 52);
  elf.writeUInt16LE(PROGRAM_HEADER_SIZE, 54);
  elf.writeUInt16LE(1, 56); // e_phnum
  elf.writeUInt16LE(64, 58); // e_shentsize
  elf.writeUInt16LE(0, 60); // e_shnum
  elf.writeUInt16LE(0, 62); // e_shstrndx
  // The one PT_LOAD segment maps the whole file at LOAD_ADDRESS, read + execute.
  const ph = ELF_HEADER_SIZE;
  elf.writeUInt32LE(1, ph); // p_type: PT_LOAD
  elf.writeUInt32LE(5, ph + 4); // p_flags: R | X
  elf.writeBigUInt64LE(0n, ph + 8); // p_offset
  elf.writeBigUInt64LE(LOAD_ADDRESS, ph + 16); // p_vaddr
  elf.writeBigUInt64LE(LOAD_ADDRESS, ph + 24); // p_paddr
  elf.writeBigUInt64LE(BigInt(elf.length), ph + 32); // p_filesz
  elf.writeBigUInt64LE(BigInt(elf.length), ph + 40); // p_memsz
  elf.writeBigUInt64LE(0x1000n, ph + 48); // p_align
  code.copy(elf, codeOffset);
  return elf;
}

function words(values: number[]): Buffer {
  const buffer = Buffer.alloc(values.length * 4);
  for (const [index, value] of values.entries()) buffer.writeUInt32LE(value, index * 4);
  return buffer;
}

const TAR_BLOCK = 512;

/**
 * A tar archive holding one executable file, what `docker import` takes as an
 * image's root filesystem. POSIX ustar, written by hand: one entry does not
 * call for a tar library.
 */
export function singleFileTar(path: string, content: Buffer, mode = 0o555): Buffer {
  if (Buffer.byteLength(path) > 99) throw new Error(`tar entry name too long: ${path}`);
  const header = Buffer.alloc(TAR_BLOCK);
  const field = (offset: number, length: number, value: string) => header.write(value, offset, length, "ascii");
  const octal = (offset: number, length: number, value: number) => field(offset, length, `${value.toString(8).padStart(length - 1, "0")}\0`);
  field(0, 100, path);
  octal(100, 8, mode);
  octal(108, 8, 0); // uid
  octal(116, 8, 0); // gid
  octal(124, 12, content.length);
  octal(136, 12, 0); // mtime: fixed, so the same program always makes the same archive
  field(148, 8, " ".repeat(8)); // checksum is computed with its own field as spaces
  field(156, 1, "0"); // regular file
  field(257, 6, "ustar\0");
  field(263, 2, "00");
  let sum = 0;
  for (const byte of header) sum += byte;
  field(148, 8, `${sum.toString(8).padStart(6, "0")}\0 `);
  const padding = (TAR_BLOCK - (content.length % TAR_BLOCK)) % TAR_BLOCK;
  return Buffer.concat([header, content, Buffer.alloc(padding), Buffer.alloc(2 * TAR_BLOCK)]);
}
