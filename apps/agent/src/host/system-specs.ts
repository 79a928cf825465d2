// Pure translation of systeminformation's result objects into NodeSpecs, kept
// apart from the calls so it can be tested with objects recorded on real machines.
import type { Systeminformation as Si } from "systeminformation";
import type { DiskType, NodeSpecs } from "./types";

/** The slices of systeminformation's results that NodeSpecs is made from. */
export interface SystemSnapshot {
  cpu: Pick<Si.CpuData, "manufacturer" | "brand" | "physicalCores" | "cores">;
  mem: Pick<Si.MemData, "total">;
  osInfo: Pick<Si.OsData, "distro" | "release" | "kernel">;
  fsSize: Pick<Si.FsSizeData, "fs" | "mount" | "size">[];
  diskLayout: Pick<Si.DiskLayoutData, "device" | "type" | "interfaceType" | "size">[];
  blockDevices: Pick<Si.BlockDevicesData, "name" | "type" | "physical" | "size" | "device">[];
  networkInterfaces: Pick<Si.NetworkInterfacesData, "iface" | "speed">[];
  defaultInterface: string;
}

export interface EngineFacts {
  /** Docker engine version; the probe does not talk to Docker itself */
  containerVersion: string;
  /** where Docker keeps images and container layers, e.g. /var/lib/docker */
  dockerDataRoot: string;
}

const MB = 1024 * 1024;
const GB = 1000 * 1000 * 1000; // disks are sold, and listed, in decimal GB

// Slowest first: when we cannot tell which disk holds Docker we claim the slowest, never overclaim.
const DISK_SPEED_ORDER: readonly DiskType[] = ["HDD", "SSD", "NVMe"];

function isUnder(path: string, mount: string): boolean {
  return mount === "/" || path === mount || path.startsWith(`${mount}/`);
}

/** The filesystem holding `path`: the mounted one with the longest matching mount point. */
function filesystemOf(path: string, fsSize: SystemSnapshot["fsSize"]): SystemSnapshot["fsSize"][number] | undefined {
  return fsSize.filter((fs) => fs.mount !== "" && isUnder(path, fs.mount)).sort((a, b) => b.mount.length - a.mount.length)[0];
}

// "/dev/nvme0n1p2" lives on "/dev/nvme0n1", "/dev/sda1" on "/dev/sda".
function isPartitionOf(fsDevice: string, diskDevice: string): boolean {
  return fsDevice.startsWith(diskDevice) && /^p?\d*$/.test(fsDevice.slice(diskDevice.length));
}

// diskLayout's `type` is "NVMe", "SSD" or "HD"; NVMe drives may also show as interfaceType "PCIe"/"NVMe".
function layoutDiskType(disk: SystemSnapshot["diskLayout"][number]): DiskType {
  if (/nvme/i.test(disk.type) || /^(nvme|pcie)/i.test(disk.interfaceType)) return "NVMe";
  if (/ssd/i.test(disk.type)) return "SSD";
  return "HDD";
}

// blockDevices knows rotational vs not ("HDD"/"SSD") but not the bus; the kernel's name tells NVMe.
function blockDiskType(device: SystemSnapshot["blockDevices"][number]): DiskType {
  if (device.name.startsWith("nvme")) return "NVMe";
  return device.physical === "SSD" ? "SSD" : "HDD";
}

function slowest(types: DiskType[]): DiskType | undefined {
  return DISK_SPEED_ORDER.find((type) => types.includes(type));
}

/**
 * The type of the disk holding `fsDevice`. diskLayout (lsblk + smartctl) is
 * preferred; it is empty on many VMs, so blockDevices is the fallback. When the
 * filesystem sits on something we cannot map to a disk (LVM, RAID, ZFS) the
 * slowest physical disk is reported; "HDD" when nothing is known.
 */
function diskTypeOf(fsDevice: string | undefined, snapshot: SystemSnapshot): DiskType {
  if (snapshot.diskLayout.length > 0) {
    const disk = fsDevice ? snapshot.diskLayout.find((d) => isPartitionOf(fsDevice, d.device)) : undefined;
    return disk ? layoutDiskType(disk) : (slowest(snapshot.diskLayout.map(layoutDiskType)) ?? "HDD");
  }
  // zram, loop and ram devices are "disks" to lsblk but hold no data.
  const disks = snapshot.blockDevices.filter((d) => d.type === "disk" && d.size > 0 && !/^(zram|loop|ram)/.test(d.name));
  const device = fsDevice ? disks.find((d) => isPartitionOf(fsDevice, d.device ?? `/dev/${d.name}`)) : undefined;
  return device ? blockDiskType(device) : (slowest(disks.map(blockDiskType)) ?? "HDD");
}

/**
 * diskGb is the total size of the filesystem holding Docker's data root (falling
 * back to "/"), because that is where tenants' images and container layers land;
 * other disks are not usable by deployments. Floored, so we never overclaim.
 */
export function toNodeSpecs(snapshot: SystemSnapshot, engine: EngineFacts): NodeSpecs {
  const { cpu, mem, osInfo } = snapshot;
  const dockerFs = filesystemOf(engine.dockerDataRoot, snapshot.fsSize) ?? filesystemOf("/", snapshot.fsSize);
  const defaultInterface = snapshot.networkInterfaces.find((i) => i.iface === snapshot.defaultInterface);
  // systeminformation reports Mbit/s, or null / -1 when the kernel does not know (most VMs).
  const speedMbps = defaultInterface?.speed ?? 0;

  return {
    cpuModel: [cpu.manufacturer, cpu.brand].filter(Boolean).join(" "),
    cpuCores: cpu.physicalCores || cpu.cores,
    cpuThreads: cpu.cores,
    ramMb: Math.floor(mem.total / MB),
    diskGb: Math.floor((dockerFs?.size ?? 0) / GB),
    diskType: diskTypeOf(dockerFs?.fs, snapshot),
    networkSpeedMbps: speedMbps > 0 ? Math.round(speedMbps) : 0,
    os: `${[osInfo.distro, osInfo.release].filter(Boolean).join(" ")} (${osInfo.kernel})`,
    containerVersion: engine.containerVersion,
  };
}
