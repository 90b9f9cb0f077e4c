//===- resume.cpp - the checkpoint directory and --resume -----------------===//
#include "runtime/formats/files.h"
#include "runtime/runtime.h"
#include "runtime/trainer/trainer.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <unistd.h>

using namespace shardc;
using namespace shardc::runtime;

void Trainer::resume() {
  // Checkpoints: the directory is made (and so checked) before the first
  // step; a resume replaces the initial state with the checkpoint's.
  checkpointer_ =
      std::make_unique<Checkpointer>(m_, mesh_, *backend_, mem_->base);
  if (leader_ && !o_.checkpointDir.empty()) {
    makeDirectories(o_.checkpointDir);
    if (access(o_.checkpointDir.c_str(), W_OK) != 0)
      throw std::runtime_error(o_.checkpointDir +
                               ": --checkpoint-dir is not writable");
  }
  if (!o_.resume.empty()) {
    doing = "resuming from a checkpoint";
    bool fromDir = o_.resume == "latest" || o_.resume == "auto";
    std::string where = fromDir ? o_.checkpointDir : o_.resume;
    std::string found =
        mesh_.broadcastString(leader_ ? findCheckpoint(where) : "");
    if (!found.empty()) {
      progress_ = checkpointer_->load(found, o_);
      if (progress_.step > o_.steps)
        throw std::runtime_error(found + ": the checkpoint is at step " +
                                 std::to_string(progress_.step) +
                                 ", past --steps " + std::to_string(o_.steps));
    } else if (o_.resume == "auto") {
      if (leader_)
        std::printf("checkpoint: none in %s; starting fresh\n", where.c_str());
    } else {
      throw std::runtime_error(
          where + ": no checkpoint to resume from" +
          (fromDir ? " (--resume=auto starts fresh when there is none)" : ""));
    }
  }
  startStep_ = lastSaved_ = progress_.step;
  endStep_ =
      o_.runSteps > 0 ? std::min(o_.steps, startStep_ + o_.runSteps) : o_.steps;
}

void Trainer::refreshWorkingCopies() {
  // One rank's bf16 working copies of the parameters (rt-working-copy) are
  // cast from them here, once they are initialized or loaded; opt_step
  // keeps them after that.
  if (shardc_program_refresh)
    mem_->run(shardc_program_refresh, "refresh");
}
