//! Runs the GPU driver's correctness checks with the kernels compiled for the CPU
//! (`gpu-driver/emulation`): the real `cuda/kernels.cu` code, every thread of every launch run
//! in turn, under AddressSanitizer and UBSan. Needs a host C++ compiler, not nvcc or a GPU.
//! Set `DYNAMO_KERNELS_SKIP_EMULATION=1` to skip.

use std::path::{Path, PathBuf};
use std::process::Command;

fn compile(cxx: &str, driver: &Path, out: &Path, sanitize: bool) -> Result<(), String> {
    let mut cmd = Command::new(cxx);
    cmd.args([
        "-std=c++17",
        "-O1",
        "-g",
        "-x",
        "c++",
        "-Wall",
        "-Wextra",
        "-Wno-unknown-pragmas",
    ])
    .arg("-I")
    .arg(driver.parent().unwrap().join("emulation"));
    if sanitize {
        cmd.args(["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]);
    }
    let output = cmd
        .arg("-o")
        .arg(out)
        .arg(driver)
        .output()
        .map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[test]
fn driver_checks_pass_with_the_kernels_emulated_on_the_cpu() {
    if std::env::var("DYNAMO_KERNELS_SKIP_EMULATION").is_ok_and(|v| v == "1") {
        eprintln!("skipped: DYNAMO_KERNELS_SKIP_EMULATION=1");
        return;
    }
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    if Command::new(&cxx).arg("--version").output().is_err() {
        eprintln!("skipped: no host C++ compiler ({cxx})");
        return;
    }
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("gpu-driver/driver.cu");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dynamo-kernels-driver-emulated");
    if let Err(sanitized) = compile(&cxx, &driver, &out, true) {
        // Toolchains without sanitizer runtimes still run the checks, just unsanitized.
        eprintln!("sanitizers unavailable, running unsanitized:\n{sanitized}");
        compile(&cxx, &driver, &out, false).expect("compiling the emulated driver");
    }
    let run = Command::new(&out)
        .arg("--no-bench")
        .output()
        .expect("running the emulated driver");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success() && !stdout.contains("FAIL"),
        "emulated driver failed ({}):\n{stdout}\n{stderr}",
        run.status
    );
    assert!(stdout.contains(" checks, 0 failed"), "{stdout}");
}
