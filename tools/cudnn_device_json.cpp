//===- cudnn_device_json.cpp - cuDNN's description of a GPU, as JSON ------===//
//
//   shardc-cudnn-device-json [DEVICE] > test/unit/data/cudnn-device-sm90.json
//
// Builds cudnn-frontend's DeviceProperties for a GPU (device 0 unless
// DEVICE is given) through the real cuDNN (>= 9.8), and writes its
// serialization (CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION) to stdout: the
// description that device-less compilation deserializes to build cuDNN
// execution plans for that GPU on a machine without one
// (test/unit/CudnnDevicelessTest.cpp). Needs a GPU; exits 1 with cuDNN's
// message where there is none.
//
//===----------------------------------------------------------------------===//
#include <cudnn_frontend.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace fe = cudnn_frontend;

int main(int argc, char **argv) {
  int32_t device = argc > 1 ? int32_t(std::atoi(argv[1])) : 0;
  fe::DeviceProperties props;
  fe::error_t e = props.set_device_id(device).build();
  if (e.is_bad()) {
    char last[1024] = "";
    cudnnGetLastErrorString(last, sizeof last);
    std::fprintf(stderr,
                 "shardc-cudnn-device-json: device %d: %s (cuDNN %zu: %s)\n",
                 int(device), e.get_message().c_str(), cudnnGetVersion(),
                 last);
    return 1;
  }
  std::vector<uint8_t> json;
  e = props.serialize(json);
  if (e.is_bad()) {
    std::fprintf(stderr, "shardc-cudnn-device-json: serialize: %s\n",
                 e.get_message().c_str());
    return 1;
  }
  // cuDNN counts the string's terminating NUL.
  while (!json.empty() && json.back() == 0)
    json.pop_back();
  std::fwrite(json.data(), 1, json.size(), stdout);
  std::fputc('\n', stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
