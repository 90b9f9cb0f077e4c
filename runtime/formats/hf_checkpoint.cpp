//===- hf_checkpoint.cpp - reading Hugging Face checkpoints ---------------===//
#include "runtime/formats/hf_checkpoint.h"
#include "runtime/formats/files.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

using namespace shardc::runtime;
using nlohmann::json;

HfCheckpoint::HfCheckpoint(const std::string &path) {
  std::string index;
  if (isDirectory(path)) {
    if (pathExists(path + "/" + kHfSingleFile))
      where_ = path + "/" + kHfSingleFile;
    else if (pathExists(path + "/" + kHfIndexFile))
      index = path + "/" + kHfIndexFile;
    else
      throw std::runtime_error(path + ": a directory without " + kHfSingleFile +
                               " or " + kHfIndexFile);
  } else if (endsWith(path, ".json")) {
    index = path;
  } else {
    where_ = path;
  }
  if (index.empty()) {
    auto file = std::make_unique<SafetensorsFile>(where_);
    for (const auto &[name, e] : file->entries())
      tensors_[name] = file.get();
    files_[where_] = std::move(file);
    return;
  }
  where_ = index;
  json j;
  try {
    j = json::parse(readTextFile(index));
  } catch (const json::exception &e) {
    throw std::runtime_error(index + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") ||
      !j["weight_map"].is_object())
    throw std::runtime_error(index + ": not a safetensors index (no "
                                     "\"weight_map\" object)");
  std::string dir = parentDirectory(index);
  for (auto &[tensor, fileName] : j["weight_map"].items()) {
    if (!fileName.is_string())
      throw std::runtime_error(index + ": the file of '" + tensor +
                               "' is not a string");
    std::string name = fileName.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." ||
        name == "..")
      throw std::runtime_error(index + ": the file of '" + tensor + "', '" +
                               name + "', is not a file name in " + dir);
    std::string file = dir + "/" + name;
    auto it = files_.find(file);
    if (it == files_.end()) {
      if (!pathExists(file))
        throw std::runtime_error(file + ": missing: " + index +
                                 " maps tensor '" + tensor + "' to it");
      it = files_.emplace(file, std::make_unique<SafetensorsFile>(file)).first;
    }
    if (!it->second->find(tensor))
      throw std::runtime_error(file + ": has no tensor '" + tensor + "', which " +
                               index + " maps to it");
    tensors_[tensor] = it->second.get();
  }
}

const SafetensorsFile *HfCheckpoint::find(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

