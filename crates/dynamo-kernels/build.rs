//! Builds the CUDA kernels with `nvcc` when it is available, otherwise selects the stub backend.
//!
//! * nvcc found: compile `cuda/kernels.cu` for sm_80 and sm_90 plus PTX (so newer GPUs JIT it),
//!   archive it, link it with the static CUDA runtime, and set `cfg(dynamo_kernels_cuda)`.
//! * nvcc missing: no native code at all; every GPU entry point returns a "built without CUDA"
//!   error and GPU tests compile out. `DYNAMO_KERNELS_REQUIRE_CUDA=1` turns this into a build
//!   failure (for release builds that must ship kernels).
//! * `DYNAMO_KERNELS_DISABLE_CUDA=1` forces the stubs even when nvcc is present.
//! * Cross-compiling (target ≠ host, e.g. the release's arm64 and macOS builds): stubs, since the
//!   host's nvcc and CUDA runtime are for the host only.
//!
//! Where nvcc is looked for: `$NVCC`, `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, `/usr/local/cuda/bin`,
//! then `PATH`. `DYNAMO_KERNELS_CUDA_ARCHS` (e.g. `80,86,90`) replaces the default SM list; PTX is
//! always emitted for the highest one.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

// Not PATH: it differs between `cargo` and `pnpm run` shells and would rebuild the kernels on
// every switch. After installing or removing nvcc, `cargo clean -p dynamo-kernels`.
const ENV_VARS: [&str; 6] = [
    "DYNAMO_KERNELS_REQUIRE_CUDA",
    "DYNAMO_KERNELS_DISABLE_CUDA",
    "DYNAMO_KERNELS_CUDA_ARCHS",
    "NVCC",
    "CUDA_HOME",
    "CUDA_PATH",
];

fn flag(name: &str) -> bool {
    matches!(
        env::var(name).as_deref().map(str::trim),
        Ok("1") | Ok("true") | Ok("yes") | Ok("on")
    )
}

fn main() {
    println!("cargo:rustc-check-cfg=cfg(dynamo_kernels_cuda)");
    println!("cargo:rustc-check-cfg=cfg(dynamo_kernels_gpu_present)");
    // Device tests run only where an NVIDIA device node exists; elsewhere they are reported as
    // ignored rather than passing vacuously.
    if std::path::Path::new("/dev/nvidia0").exists() {
        println!("cargo:rustc-cfg=dynamo_kernels_gpu_present");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=cuda/kernels.cu");
    println!("cargo:rerun-if-changed=cuda/dynamo_kernels.h");
    for var in ENV_VARS {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let require = flag("DYNAMO_KERNELS_REQUIRE_CUDA");
    if flag("DYNAMO_KERNELS_DISABLE_CUDA") {
        if require {
            panic!("dynamo-kernels: DYNAMO_KERNELS_REQUIRE_CUDA=1 and DYNAMO_KERNELS_DISABLE_CUDA=1 contradict each other");
        }
        stubs("DYNAMO_KERNELS_DISABLE_CUDA=1 was set");
        return;
    }
    let (target, host) = (
        env::var("TARGET").unwrap_or_default(),
        env::var("HOST").unwrap_or_default(),
    );
    if target != host {
        if require {
            panic!("dynamo-kernels: DYNAMO_KERNELS_REQUIRE_CUDA=1, but the CUDA kernels are built only natively (cross-compiling for {target} on {host})");
        }
        stubs(&format!(
            "cross-compiled for {target} on {host}; the kernels are built only natively, where nvcc is present"
        ));
        return;
    }
    match find_nvcc() {
        Some((nvcc, version)) => build_cuda(&nvcc, &version),
        None if require => panic!(
            "dynamo-kernels: DYNAMO_KERNELS_REQUIRE_CUDA=1 but no working nvcc was found \
             (looked at $NVCC, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin and PATH)"
        ),
        None => stubs(
            "no nvcc at build time in $NVCC, $CUDA_HOME/bin, $CUDA_PATH/bin, \
             /usr/local/cuda/bin or PATH",
        ),
    }
}

fn stubs(why: &str) {
    println!(
        "cargo:rustc-env=DYNAMO_KERNELS_STUB_REASON=dynamo-kernels was built without CUDA ({why}); \
         rebuild with nvcc available to get the GPU kernels, and set DYNAMO_KERNELS_REQUIRE_CUDA=1 \
         to make a build without them fail"
    );
    println!("cargo:warning=dynamo-kernels: building CPU-only stubs ({why})");
}

/// The first nvcc that runs, with its release (`"12.4"`).
fn find_nvcc() -> Option<(PathBuf, String)> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = env::var_os("NVCC") {
        candidates.push(PathBuf::from(p));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env::var_os(var) {
            candidates.push(Path::new(&home).join("bin").join("nvcc"));
        }
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    candidates.push(PathBuf::from("nvcc"));
    candidates.into_iter().find_map(|nvcc| {
        let out = Command::new(&nvcc).arg("--version").output().ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text
            .split("release ")
            .nth(1)?
            .split(|c: char| c == ',' || c.is_whitespace())
            .next()?
            .to_string();
        Some((nvcc, version))
    })
}

fn parse_version(version: &str) -> (u32, u32) {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn archs(version: &str) -> Vec<u32> {
    if let Ok(list) = env::var("DYNAMO_KERNELS_CUDA_ARCHS") {
        let archs: Vec<u32> = list
            .split(',')
            .filter_map(|a| a.trim().trim_start_matches("sm_").parse().ok())
            .collect();
        if archs.is_empty() {
            panic!("dynamo-kernels: DYNAMO_KERNELS_CUDA_ARCHS={list:?} names no architecture (expected e.g. \"80,90\")");
        }
        return archs;
    }
    // sm_90 needs CUDA 11.8 or newer.
    if parse_version(version) >= (11, 8) {
        vec![80, 90]
    } else {
        vec![80]
    }
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("dynamo-kernels: could not run {what}: {e}"));
    if !out.status.success() {
        panic!(
            "dynamo-kernels: {what} failed ({}):\n{}\n{}\nSet DYNAMO_KERNELS_DISABLE_CUDA=1 to build the CPU-only stubs instead.",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn build_cuda(nvcc: &Path, version: &str) {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let source = manifest.join("cuda").join("kernels.cu");
    let object = out_dir.join("dynamo_kernels.o");
    let library = out_dir.join("libdynamo_kernels_cuda.a");

    let archs = archs(version);
    let ptx = *archs.iter().max().expect("at least one arch");
    let mut targets: Vec<String> = archs.iter().map(|a| format!("sm_{a}")).collect();
    targets.push(format!("compute_{ptx}"));

    let mut compile = Command::new(nvcc);
    compile
        .args([
            "-c",
            "-std=c++17",
            "-O3",
            "-lineinfo",
            "-Xcompiler",
            "-fPIC",
        ])
        .arg("-o")
        .arg(&object)
        .arg(&source);
    for a in &archs {
        compile
            .arg("-gencode")
            .arg(format!("arch=compute_{a},code=sm_{a}"));
    }
    compile
        .arg("-gencode")
        .arg(format!("arch=compute_{ptx},code=compute_{ptx}"));
    run(&mut compile, "nvcc (compiling cuda/kernels.cu)");
    run(
        Command::new(nvcc)
            .arg("--lib")
            .arg("-o")
            .arg(&library)
            .arg(&object),
        "nvcc --lib",
    );

    println!("cargo:rustc-link-search=native={}", out_dir.display());
    println!("cargo:rustc-link-lib=static=dynamo_kernels_cuda");
    link_cudart(nvcc);
    println!("cargo:rustc-cfg=dynamo_kernels_cuda");
    println!("cargo:rustc-env=DYNAMO_KERNELS_CUDA_VERSION={version}");
    println!(
        "cargo:rustc-env=DYNAMO_KERNELS_CUDA_TARGETS={}",
        targets.join(",")
    );
}

/// Links the static CUDA runtime when it can be found (so the binary loads on machines without
/// a CUDA toolkit and reports "no device" instead), else the shared one.
fn link_cudart(nvcc: &Path) {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env::var_os(var) {
            dirs.push(Path::new(&home).join("lib64"));
            dirs.push(Path::new(&home).join("lib"));
        }
    }
    let resolved = if nvcc.components().count() == 1 {
        env::var_os("PATH").and_then(|path| {
            env::split_paths(&path)
                .map(|dir| dir.join(nvcc))
                .find(|p| p.is_file())
        })
    } else {
        Some(nvcc.to_path_buf())
    };
    let root = resolved
        .and_then(|p| p.canonicalize().ok())
        .and_then(|p| Some(p.parent()?.parent()?.to_path_buf()));
    if let Some(root) = root {
        dirs.push(root.join("lib64"));
        dirs.push(root.join("lib"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    // Searched by the linker anyway; listed only to detect the static runtime.
    let system = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ];
    let existing: Vec<&PathBuf> = dirs.iter().filter(|d| d.is_dir()).collect();
    for dir in existing
        .iter()
        .filter(|d| !system.iter().any(|s| Path::new(s) == d.as_path()))
    {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    let system_dirs: Vec<PathBuf> = system.iter().map(PathBuf::from).collect();
    let existing: Vec<&PathBuf> = existing.into_iter().chain(system_dirs.iter()).collect();
    if let Some(dir) = existing
        .iter()
        .find(|d| d.join("libcudart_static.a").is_file())
    {
        // rustc bundles static libraries itself, so it needs the directory even when it is a
        // system one.
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static=cudart_static");
        for lib in ["dl", "rt", "pthread"] {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    } else {
        println!("cargo:rustc-link-lib=dylib=cudart");
    }
    println!("cargo:rustc-link-lib=dylib=stdc++");
}
