#!/usr/bin/env python3
"""The minimum supported Rust version, as CI checks it without installing an older toolchain
(rustup's toolchains do not come from the package registries):

- every package of the workspace declares the workspace's `rust-version`, so that cargo
  refuses an older toolchain with a clear error instead of failing somewhere in a build;
- no dependency in the lock file (every feature on: CUDA's included) declares a newer one;
- (in `.ci/run`'s clippy passes) clippy's `incompatible_msrv` lint, on by default, reads the
  same `rust-version` and fails on a standard library API stabilised after it.

What is not checked: language features newer than the version (edition 2024 and let chains
need 1.85 and 1.88, below it) and a build with that toolchain itself.
"""
import json
import subprocess
import sys


def version(text):
    return tuple(int(part) for part in text.split("."))


def main():
    metadata = json.loads(
        subprocess.check_output(
            ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"]
        )
    )
    members = set(metadata["workspace_members"])
    ours = {p["name"]: p.get("rust_version") for p in metadata["packages"] if p["id"] in members}
    declared = set(ours.values())
    if None in declared or len(declared) != 1:
        sys.exit(f"check-msrv: the workspace's packages declare rust-version {ours}; expected one, in each")
    msrv = declared.pop()
    newer = [
        f"{p['name']} {p['version']} (rust-version {p['rust_version']})"
        for p in metadata["packages"]
        if p["id"] not in members and p.get("rust_version") and version(p["rust_version"]) > version(msrv)
    ]
    if newer:
        sys.exit(f"check-msrv: dependencies need a newer Rust than {msrv}: " + ", ".join(newer))
    highest = max(
        (version(p["rust_version"]), p["name"])
        for p in metadata["packages"]
        if p["id"] not in members and p.get("rust_version")
    )
    print(
        f"check-msrv: rust-version {msrv} declared by {', '.join(sorted(ours))}; "
        f"the highest a dependency declares: {'.'.join(map(str, highest[0]))} ({highest[1]})"
    )


if __name__ == "__main__":
    main()
