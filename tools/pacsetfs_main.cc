// pacsetfs: mount a block store so that every forest is a file.
//
//   pacsetfs mount MOUNTPOINT [--store URI] [-f] [-o opts] [--trace FILE] ...
//   pacsetfs unmount MOUNTPOINT
//   pacsetfs drop-cache MOUNTPOINT [NAME] | MOUNTPOINT/NAME.pac
//   pacsetfs SOURCE MOUNTPOINT [-o opts]      (the form mount.fuse3 and /etc/fstab use)
//
// Exit status: 0 success, 1 runtime failure, 2 usage error.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "fs/pacsetfs.h"
#include "protocol/control.h"
#include "store/block_store.h"

namespace {

int Fail(const pacset::Status& s) {
  std::fprintf(stderr, "pacsetfs: error: %s\n", s.ToString().c_str());
  return 1;
}

bool IsSubcommand(const char* a) {
  for (const char* s :
       {"mount", "unmount", "umount", "drop-cache", "stats", "-h", "--help", "--version"})
    if (std::strcmp(a, s) == 0) return true;
  return false;
}

// pacsetfs SOURCE MOUNTPOINT [-o opts] [-f] [-n] [-s] ... as run by mount.fuse3.
int FstabForm(int argc, char** argv) {
  pacset::MountOptions opts;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o" && i + 1 < argc) {
      pacset::Status s = pacset::ParseMountOptionString(argv[++i], &opts);
      if (!s.ok()) {
        std::fprintf(stderr, "pacsetfs: %s\n", s.message().c_str());
        return 2;
      }
    } else if (a.rfind("-o", 0) == 0 && a.size() > 2) {
      pacset::Status s = pacset::ParseMountOptionString(a.substr(2), &opts);
      if (!s.ok()) {
        std::fprintf(stderr, "pacsetfs: %s\n", s.message().c_str());
        return 2;
      }
    } else if (a == "-f") {
      opts.foreground = true;
    } else if (a == "-n" || a == "-s" || a == "-v") {
      // mount(8) flags passed through by mount.fuse3: nothing to do
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr,
                   "pacsetfs: unknown flag %s\nusage: pacsetfs SOURCE MOUNTPOINT [-o opts]\n",
                   a.c_str());
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) {
    std::fprintf(stderr,
                 "usage: pacsetfs SOURCE MOUNTPOINT [-o options]\n"
                 "       pacsetfs mount MOUNTPOINT [--store URI] (see pacsetfs --help)\n");
    return 2;
  }
  // SOURCE is the store URI; "pacsetfs" or "none" means the default store.
  if (positional[0] != "pacsetfs" && positional[0] != "none" && opts.store_uri.empty())
    opts.store_uri = positional[0];
  opts.mountpoint = positional[1];
  pacset::HideStorePasswords(argc, argv);
  pacset::Status s = pacset::RunMount(opts);
  return s.ok() ? 0 : Fail(s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && !IsSubcommand(argv[1])) return FstabForm(argc, argv);

  CLI::App app{"pacsetfs: every forest in a block store as a file, read block by block"};
  app.set_version_flag("--version", std::string("pacsetfs ") + PACSET_VERSION);
  app.require_subcommand(1);
  app.footer(
      "Also: pacsetfs SOURCE MOUNTPOINT -o opts   (mount -t fuse.pacsetfs, /etc/fstab)\n"
      "Mount options (-o): ro, allow_other, cache_size=SIZE, trace=FILE, store_timeout=MS,\n"
      "  catalog_refresh=MS, no_push_blocks, no_direct_store_reads, prefetch_bins,\n"
      "  readahead=BYTES, fault_readahead=BYTES (1MiB), fault_readahead_file_max=SIZE\n"
      "  (256MiB), fault_readahead_per_user=SIZE (32MiB), fault_readahead_total=SIZE\n"
      "  (128MiB), threads=N, password_file=PATH,\n"
      "  no_auto_unmount, debug,\n"
      "  max_gather_handles_per_user=N (4096), max_gather_handles=N (16384),\n"
      "  gather_memory_per_user=SIZE (4MiB), gather_memory=SIZE (16MiB); dev, suid,\n"
      "  nofail, _netdev, defaults are ignored. A redis password: $REDISCLI_AUTH or\n"
      "  password_file=PATH keep it off command lines.");

  pacset::MountOptions mopts;
  std::string mount_o, cache_size;
  auto* m = app.add_subcommand("mount", "Mount a store (runs in the background unless -f)");
  m->add_option("MOUNTPOINT", mopts.mountpoint, "Directory to mount on")->required();
  m->add_option("--store", mopts.store_uri,
                "Store URI: rocksdb:PATH, dir:PATH, redis://HOST:PORT[/DB] or "
                "redis-cluster://HOST:PORT[,HOST:PORT...] (default: $PACSET_STORE "
                "or " +
                    pacset::DefaultStoreUri() + ")");
  m->add_flag("-f,--foreground", mopts.foreground, "Stay in the foreground, log to stderr");
  m->add_option("-o", mount_o, "Comma-separated mount options (see below)");
  m->add_option("--trace", mopts.trace_path, "Write a block-access trace to FILE");
  m->add_option("--cache-size", cache_size, "Daemon block cache size (default 256MiB)");
  m->add_option("--store-timeout", mopts.store_timeout_ms,
                "Milliseconds before a block that cannot be fetched becomes EIO (default 10000)");
  m->add_flag("--allow-other", mopts.allow_other, "Let other users read the mount");

  std::string umount_point;
  auto* u = app.add_subcommand("unmount", "Unmount");
  u->alias("umount");
  u->add_option("MOUNTPOINT", umount_point)->required();

  std::string drop_point, drop_name;
  auto* d = app.add_subcommand("drop-cache",
                               "Make a forest cold: drop the kernel page cache and the daemon "
                               "cache for it, even while it is mapped");
  d->add_option("MOUNTPOINT", drop_point, "The mount, or a forest's file MOUNTPOINT/NAME.pac")
      ->required();
  d->add_option("NAME", drop_name, "Forest name (default: all forests, or the file's)");

  std::string stats_point;
  auto* st = app.add_subcommand("stats", "Print the live counters of a mount (JSON)");
  st->add_option("MOUNTPOINT", stats_point)->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  pacset::HideStorePasswords(argc, argv);

  if (*m) {
    if (!mount_o.empty()) {
      pacset::Status s = pacset::ParseMountOptionString(mount_o, &mopts);
      if (!s.ok()) {
        std::fprintf(stderr, "pacsetfs: %s\n", s.message().c_str());
        return 2;
      }
    }
    if (!cache_size.empty()) {
      pacset::Status s = pacset::ParseMountOptionString("cache_size=" + cache_size, &mopts);
      if (!s.ok()) {
        std::fprintf(stderr, "pacsetfs: %s\n", s.message().c_str());
        return 2;
      }
    }
    pacset::Status s = pacset::RunMount(mopts);
    return s.ok() ? 0 : Fail(s);
  }
  if (*u) {
    pacset::Status s = pacset::Unmount(umount_point);
    return s.ok() ? 0 : Fail(s);
  }
  if (*d) {
    pacset::Status s = pacset::DropCaches(drop_point, drop_name);
    return s.ok() ? 0 : Fail(s);
  }
  if (*st) {
    std::ifstream in(stats_point + pacset::kStatsFilePath);
    if (!in) return Fail(pacset::Status::NotFound("no pacsetfs mounted on " + stats_point));
    std::cout << in.rdbuf();
    return 0;
  }
  return 0;
}
