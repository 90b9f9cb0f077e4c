//===- hf_io.h - Hugging Face checkpoints in and out -------------*- C++ -*-===//
//
// What transformers' save_pretrained writes and from_pretrained reads (the
// reader, HfCheckpoint, is runtime/formats/hf_checkpoint.h): the export.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_FORMATS_HF_IO_H
#define SHARDC_RUNTIME_FORMATS_HF_IO_H

#include "runtime/backend.h"
#include "runtime/mesh.h"
#include "runtime/program/model.h"
#include "runtime/formats/hf_checkpoint.h"
#include "runtime/formats/safetensors.h"

#include <map>
#include <memory>
#include <string>

namespace shardc::runtime {

/// Bytes from "5GB", "500MB", "10KB" (powers of 1000, as transformers
/// reads them), "2GiB" (powers of 1024) or a plain number; throws naming
/// `flag` otherwise.
int64_t parseByteSize(const std::string &flag, const std::string &text);

/// Writes the parameters (gathered tensor by tensor from the shards) under
/// `dir` as save_pretrained does: files of at most `maxShardBytes` (a
/// tensor larger than that gets a file of its own), their index when there
/// are several, and the model's config.json when it has one. Every rank
/// calls it; rank 0 writes. Returns the number of files written.
int64_t exportHf(const Manifest &m, const Mesh &mesh, Backend &backend,
                 const char *params, const std::string &dir,
                 int64_t maxShardBytes);

} // namespace shardc::runtime

#endif // SHARDC_RUNTIME_FORMATS_HF_IO_H
