#include "runtime/model/safetensors.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/options.h"
#include "runtime/run_folder.h"

namespace memscript {

namespace {

const std::pair<torch::ScalarType, const char*> kDtypes[] = {{torch::kFloat32, "F32"},
                                                             {torch::kFloat64, "F64"},
                                                             {torch::kInt64, "I64"},
                                                             {torch::kBool, "BOOL"}};

const char* dtype_name(torch::ScalarType type, const std::string& tensor) {
  for (const auto& [scalar, name] : kDtypes)
    if (scalar == type) return name;
  throw UserError("save_safetensors: tensor '" + tensor + "' is " + c10::toString(type) +
                  "; only float32, float64, int64 and bool are written");
}

torch::ScalarType dtype_of(const std::string& name, const std::string& where) {
  for (const auto& [scalar, text] : kDtypes)
    if (name == text) return scalar;
  throw UserError(where + ": dtype '" + name + "' is not one memscript reads");
}

void append_le64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> contiguous;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (!names.insert(name).second || name == "__metadata__")
      throw UserError("save_safetensors: the name '" + name + "' is given twice or reserved");
    const torch::Tensor cpu = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(cpu.numel()) * cpu.element_size();
    header[name] = {{"dtype", dtype_name(cpu.scalar_type(), name)},
                    {"shape", cpu.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(cpu);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string content;
  content.reserve(8 + text.size() + offset);
  append_le64(content, text.size());
  content += text;
  for (const torch::Tensor& tensor : contiguous) {
    content.append(static_cast<const char*>(tensor.data_ptr()),
                   static_cast<size_t>(tensor.numel()) * tensor.element_size());
  }
  write_file_atomic(path, content);
}

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
  const std::string where = "load_safetensors: " + path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(where + ": cannot open the file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string content = buffer.str();
  if (content.size() < 8) throw UserError(where + ": too short for a safetensors file");
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(content[i]);
  if (length > content.size() - 8) throw UserError(where + ": the header runs past the file");
  const nlohmann::json header = nlohmann::json::parse(content.substr(8, length), nullptr, false);
  if (!header.is_object()) throw UserError(where + ": the header is not a JSON object");
  const uint64_t data = 8 + length;
  SafetensorsFile file;
  std::vector<std::pair<uint64_t, std::pair<std::string, torch::Tensor>>> found;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw UserError(where + ": __metadata__ is not an object");
      for (const auto& [key, value] : entry.items())
        if (value.is_string()) file.metadata[key] = value.get<std::string>();
      continue;
    }
    try {
      const torch::ScalarType type = dtype_of(entry.at("dtype").get<std::string>(), where);
      const std::vector<int64_t> shape = entry.at("shape").get<std::vector<int64_t>>();
      const auto range = entry.at("data_offsets").get<std::vector<uint64_t>>();
      // The size from the shape, checked against the bytes there are before allocating.
      double bytes = static_cast<double>(c10::elementSize(type));
      for (int64_t size : shape) bytes *= size < 0 ? -1.0 : static_cast<double>(size);
      if (range.size() != 2 || range[1] < range[0] ||
          static_cast<double>(range[1] - range[0]) != bytes || range[1] > content.size() - data)
        throw UserError(where + ": tensor '" + name + "' has a byte range that does not fit");
      torch::Tensor tensor = torch::empty(shape, torch::TensorOptions(type));
      if (range[1] > range[0])
        std::memcpy(tensor.data_ptr(), content.data() + data + range[0], range[1] - range[0]);
      found.push_back({range[0], {name, tensor}});
    } catch (const nlohmann::json::exception&) {
      throw UserError(where + ": tensor '" + name + "' lacks dtype, shape or data_offsets");
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& item : found) file.tensors.push_back(std::move(item.second));
  return file;
}

}  // namespace memscript
