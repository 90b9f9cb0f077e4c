# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "SHARDC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit",
                   "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.shardc_obj_root, "test")

# SHARDC_EMU_STREAM_ORDER=seed:N runs every emulated CUDA test in that
# stream order (check_cuda_emulated.py takes it as its default).
# SHARDC_RUNTIME_DIR, SHARDC_CXX and the sanitizers' options: the trainers
# linked against a sanitized runtime (tools/sanitize/run.sh).
llvm_config.with_system_environment(["HOME", "TMPDIR", "OMP_NUM_THREADS",
                                     "SHARDC_EMU_STREAM_ORDER",
                                     "SHARDC_RUNTIME_DIR", "SHARDC_CXX",
                                     "ASAN_OPTIONS", "UBSAN_OPTIONS"])
llvm_config.use_default_substitutions()

# The system interpreter: it has Debian's PyTorch for the reference checks.
config.substitutions.append(("%python", config.python_executable))
# shardc links --target cuda --cuda-emulation (the CUDA toolkit's headers
# and Boost.Context were found at build time).
if config.shardc_cuda_emulation == "ON":
    config.available_features.add("cuda-emulation")
# shardc links --target cuda for a GPU (nvcc and the CUDA libraries were
# found at build time; no GPU is needed to link).
if getattr(config, "shardc_cuda_target", "") == "ON":
    config.available_features.add("cuda-target")
# The safetensors reference implementation (PyPI), where %python has it: the
# round trip of what the trainer writes (CI has none: Debian lacks it).
import subprocess
if subprocess.run([config.python_executable, "-c", "import safetensors, numpy"],
                  capture_output=True).returncode == 0:
    config.available_features.add("safetensors-reference")
# PyPI's tokenizers, where %python has it: tools/prepare_data.py's test.
if subprocess.run([config.python_executable, "-c", "import tokenizers, numpy"],
                  capture_output=True).returncode == 0:
    config.available_features.add("tokenizers")
# Debian's matplotlib (tools/setup.sh installs it): tools/plot.py's test.
if subprocess.run([config.python_executable, "-c", "import matplotlib"],
                  capture_output=True).returncode == 0:
    config.available_features.add("matplotlib")
config.substitutions.append(("%e2e", os.path.join(config.test_source_root, "e2e")))

tool_dirs = [config.shardc_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["shardc", "shardc-opt"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.shardc_tools_dir, append_path=True)
