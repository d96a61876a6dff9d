// Reads a native binary's header: its object format and CPU, so a build or a package that holds
// the wrong binary is caught before it ships.
import { closeSync, openSync, readSync } from 'node:fs';

const ELF_MACHINES = { 0x3e: 'x64', 0xb7: 'arm64' };
const MACHO_CPUS = { 0x01000007: 'x64', 0x0100000c: 'arm64' };

/** `{ format: 'elf' | 'mach-o', arch }` of a 64-bit little-endian shared library; throws otherwise. */
export function binaryFormat(path) {
  const header = Buffer.alloc(20);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  if (header.readUInt32BE(0) === 0x7f454c46) {
    if (header[4] !== 2 || header[5] !== 1) throw new Error(`${path}: not a 64-bit little-endian ELF file`);
    if (header.readUInt16LE(16) !== 3) throw new Error(`${path}: an ELF file but not a shared object`);
    return { format: 'elf', arch: ELF_MACHINES[header.readUInt16LE(18)] ?? `e_machine ${header.readUInt16LE(18)}` };
  }
  if (header.readUInt32LE(0) === 0xfeedfacf) {
    const MH_DYLIB = 6;
    if (header.readUInt32LE(12) !== MH_DYLIB) throw new Error(`${path}: a Mach-O file but not a dynamic library`);
    return { format: 'mach-o', arch: MACHO_CPUS[header.readUInt32LE(4)] ?? `cputype ${header.readUInt32LE(4)}` };
  }
  throw new Error(`${path}: neither an ELF nor a 64-bit Mach-O file`);
}

/** The format and CPU a platform's binary must have (`linux-arm64-musl` → elf, arm64). */
export function expectedFormat(platform) {
  const [os, arch] = platform.split('-');
  return { format: os === 'darwin' ? 'mach-o' : 'elf', arch };
}
