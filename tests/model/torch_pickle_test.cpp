// The restricted unpickler: state dicts as torch.save pickles them (protocols 2 and 4), and
// refusals — forbidden globals (nothing runs), truncation, bad opcodes, values of the wrong kind.
#include "engine/model/torch_pickle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "tests/support/test_support.h"
#include "tests/support/torch_save_writer.h"

namespace offgen {
namespace {

using test::PickleWriter;
using test::TorchTensorSpec;

PickledStateDict read(const std::string& pickle) {
  return read_state_dict_pickle({reinterpret_cast<const std::byte*>(pickle.data()), pickle.size()},
                                "x.bin: archive/data.pkl");
}

std::string read_error(const std::string& pickle) {
  try {
    read(pickle);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the pickle was accepted";
  return "";
}

// Two tensors viewing one fp16 storage (a tied head: same key), a bf16 one at an offset with
// strides of a size-1 dimension, and an fp32 scalar.
const std::vector<TorchTensorSpec> kPickleTensors = {
    {"model.decoder.embed_tokens.weight", "0", "HalfStorage", 12, {3, 4}},
    {"lm_head.weight", "0", "HalfStorage", 12, {3, 4}},
    {"model.decoder.layers.0.fc1.bias", "1", "BFloat16Storage", 10, {1, 5}, {99, 1}, 5},
    {"scale", "2", "FloatStorage", 1, {}},
};

TEST(TorchPickle, ReadsAStateDictAsTorchSavePicklesIt) {
  const PickledStateDict dict = read(test::torch_state_dict_pickle(kPickleTensors));
  ASSERT_EQ(dict.tensors.size(), kPickleTensors.size());
  for (std::size_t i = 0; i < kPickleTensors.size(); ++i) {
    const PickledTensor& tensor = dict.tensors[i];
    EXPECT_EQ(tensor.name, kPickleTensors[i].name);
    EXPECT_EQ(tensor.storage_key, kPickleTensors[i].key);
    EXPECT_EQ(tensor.storage_offset, kPickleTensors[i].offset);
    EXPECT_EQ(tensor.shape, kPickleTensors[i].shape);
  }
  EXPECT_EQ(dict.tensors[0].strides, (std::vector<std::int64_t>{4, 1}));
  EXPECT_EQ(dict.tensors[2].strides, (std::vector<std::int64_t>{99, 1}));
  EXPECT_TRUE(dict.tensors[3].strides.empty());
  ASSERT_EQ(dict.storages.size(), 3u);  // the tied pair shares storage "0"
  EXPECT_EQ(dict.storages.at("0").type, "torch.HalfStorage");
  EXPECT_EQ(dict.storages.at("0").dtype, DType::f16);
  EXPECT_EQ(dict.storages.at("0").numel, 12u);
  EXPECT_EQ(dict.storages.at("1").dtype, DType::bf16);
  EXPECT_EQ(dict.storages.at("2").dtype, DType::f32);
}

TEST(TorchPickle, LargeSizesAndOffsetsArriveThroughLong1) {
  const std::uint64_t big = 3'000'000'000;  // past BININT's int32
  const PickledStateDict dict =
      read(test::torch_state_dict_pickle({{"w", "0", "HalfStorage", big, {2}, {}, big - 2}}));
  EXPECT_EQ(dict.storages.at("0").numel, big);
  EXPECT_EQ(dict.tensors[0].storage_offset, big - 2);
}

TEST(TorchPickle, StorageTypesOffgenDoesNotReadHaveNoDtype) {
  const PickledStateDict dict =
      read(test::torch_state_dict_pickle({{"ids", "0", "LongStorage", 4, {4}}}));
  EXPECT_EQ(dict.storages.at("0").type, "torch.LongStorage");
  EXPECT_FALSE(dict.storages.at("0").dtype.has_value());
}

// The same state dict in protocol 4's spelling: FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL.
TEST(TorchPickle, ReadsProtocol4Opcodes) {
  const auto short_string = [](std::string_view text) {
    return std::string("\x8c") + static_cast<char>(text.size()) + std::string(text);
  };
  const auto stack_global = [&](std::string_view module, std::string_view name) {
    return short_string(module) + "\x94" + short_string(name) + "\x94\x93\x94";
  };
  PickleWriter w;
  w.proto(4).raw(std::string("\x95\x00\x00\x00\x00\x00\x00\x00\x00", 9));
  w.raw(stack_global("collections", "OrderedDict")).op(')').op('R').raw("\x94").op('(');
  w.raw(short_string("w")).raw(stack_global("torch._utils", "_rebuild_tensor_v2")).op('(');
  w.op('(').raw(short_string("storage")).raw(stack_global("torch", "HalfStorage"));
  w.raw(short_string("7")).raw(short_string("cpu")).integer(6).op('t').op('Q');
  w.integer(0).integer(2).integer(3).op('\x86').integer(3).integer(1).op('\x86').op('\x89');
  w.get(2).op(')').op('R').op('t').op('R').op('u');  // memo 2: the OrderedDict global
  const PickledStateDict dict = read(w.stop().bytes());
  ASSERT_EQ(dict.tensors.size(), 1u);
  EXPECT_EQ(dict.tensors[0].name, "w");
  EXPECT_EQ(dict.tensors[0].shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(dict.storages.at("7").numel, 6u);
}

TEST(TorchPickle, ForbiddenGlobalsAreRefusedBeforeAnythingCouldRun) {
  test::TempDir tmp;
  const std::filesystem::path marker = tmp.path() / "ran";
  const std::string command = "touch " + marker.string();
  // os.system(command) and builtins.eval(...) as a malicious pickle spells them; GLOBAL, and
  // protocol 4's STACK_GLOBAL.
  PickleWriter system_call;
  system_call.proto(2).global("os", "system").op('(').string(command).op('t').op('R').stop();
  PickleWriter eval_call;
  eval_call.proto(2).global("builtins", "eval").op('(');
  eval_call.string("__import__('os').system('" + command + "')").op('t').op('R').stop();
  PickleWriter stacked;
  stacked.proto(4).string("builtins").string("exec").op('\x93').op('(').string("1").op('t');
  stacked.op('R').stop();
  // A forbidden global hidden inside an otherwise ordinary state dict.
  const std::string hidden =
      test::torch_state_dict_pickle({{"w", "0", "HalfStorage", 1, {1}}})
          .insert(2, "csubprocess\ncheck_call\n0");  // pushed, then popped: refused all the same
  for (const auto& [pickle, name] :
       std::vector<std::pair<std::string, std::string>>{{system_call.bytes(), "os.system"},
                                                        {eval_call.bytes(), "builtins.eval"},
                                                        {stacked.bytes(), "builtins.exec"},
                                                        {hidden, "subprocess.check_call"}}) {
    const std::string message = read_error(pickle);
    EXPECT_NE(message.find("x.bin: archive/data.pkl: refusing global '" + name + "'"),
              std::string::npos)
        << message;
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(TorchPickle, EveryTruncationIsAnError) {
  const std::string pickle = test::torch_state_dict_pickle(kPickleTensors);
  for (std::size_t size = 0; size < pickle.size(); ++size) {
    const std::string message = read_error(pickle.substr(0, size));
    EXPECT_NE(message.find("x.bin: archive/data.pkl: "), std::string::npos) << size << message;
    EXPECT_NE(message.find("(pickle byte "), std::string::npos) << size << message;
  }
  EXPECT_NE(read_error(pickle.substr(0, 40)).find("truncated"), std::string::npos);
}

TEST(TorchPickle, MalformedPicklesNameTheProblem) {
  const auto error_of = [](PickleWriter w) { return read_error(w.bytes()); };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {error_of(PickleWriter().proto(2).op('G')), "unsupported pickle opcode 0x47"},
      {error_of(PickleWriter().proto(9)), "pickle protocol 9"},
      {error_of(PickleWriter().proto(2).op(']').stop()), "the pickled object is a list"},
      {error_of(PickleWriter().proto(2).op('t')), "finds no MARK"},
      {error_of(PickleWriter().proto(2).op('R')), "finds no value on the stack"},
      {error_of(PickleWriter().proto(2).get(7)), "memo entry 7 is read before it is written"},
      {error_of(PickleWriter().proto(2).op('}').string("a").integer(1).op('s').stop()),
       "entry 'a' is a int, not a tensor"},
      {error_of(PickleWriter().proto(2).op('}').integer(1).op('}').op('s').stop()),
       "a state dict key is a int"},
      {error_of(PickleWriter().proto(2).op(')').string("x").op('a')),
       "APPEND's target is a tuple, not a list"},
      {error_of(PickleWriter().proto(2).op('(').string("storage").op('t').op('Q')),
       "a persistent id is not ('storage'"},
      {error_of(PickleWriter().proto(2).global("collections", "OrderedDict").integer(1).op('R')),
       "REDUCE's arguments is a int, not a tuple"},
      {error_of(PickleWriter().proto(2).op('\x8a').raw("\x09")), "does not fit in 64 bits"},
  };
  for (const auto& [message, problem] : cases) {
    EXPECT_NE(message.find(problem), std::string::npos) << message;
    EXPECT_EQ(message.find("x.bin: archive/data.pkl: "), 0u) << message;
  }
}

TEST(TorchPickle, AStorageDescribedTwoWaysIsRefused) {
  const std::string message = read_error(test::torch_state_dict_pickle(
      {{"a", "0", "HalfStorage", 4, {4}}, {"b", "0", "FloatStorage", 4, {4}}}));
  EXPECT_NE(message.find("storage '0' is described twice"), std::string::npos) << message;
}

TEST(TorchPickle, ATensorNamedTwiceIsRefused) {
  const std::string message = read_error(test::torch_state_dict_pickle(
      {{"a", "0", "HalfStorage", 4, {4}}, {"a", "1", "HalfStorage", 4, {4}}}));
  EXPECT_NE(message.find("tensor 'a' appears twice"), std::string::npos) << message;
}

TEST(TorchPickle, SizesAndStridesMustAgree) {
  const std::string message =
      read_error(test::torch_state_dict_pickle({{"a", "0", "HalfStorage", 4, {2, 2}, {1}}}));
  EXPECT_NE(message.find("a tensor has 2 sizes but 1 strides"), std::string::npos) << message;
}

}  // namespace
}  // namespace offgen
