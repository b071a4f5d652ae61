// --model names: dummy:NAME, directories, bare config names under each rule, and Hugging Face
// names found in a hub cache laid out as huggingface_hub lays it out (HF_HUB_CACHE, refs/main).
#include "engine/model/model_name.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/hf_cache.h"
#include "tests/support/hf_cache_fixture.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;

std::string resolve_error(const std::string& text, BareConfigName bare = BareConfigName::refused) {
  try {
    resolve_model_name(text, bare);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << text << " was accepted";
  return "";
}

const fs::path kFixture = test::data_dir() / "golden" / "tiny-preln-bin";

TEST(ModelName, DummyPrefixNamesAConfigUnderEveryRule) {
  for (const BareConfigName bare : {BareConfigName::refused, BareConfigName::dummy_weights}) {
    const ModelName name = resolve_model_name("dummy:OPT-1.3B", bare);
    EXPECT_EQ(name.kind, ModelName::Kind::dummy);
    EXPECT_EQ(name.config_name, "opt-1.3b");
    EXPECT_EQ(name.config().hidden_size, 2048);
    EXPECT_EQ(name.spec(), "dummy:opt-1.3b");
    EXPECT_EQ(name.describe(), "opt-1.3b (dummy weights)");
  }
  for (const char* bad : {"dummy:opt-7b", "dummy:", "dummy:facebook/opt-125m"}) {
    const std::string message = resolve_error(bad);
    EXPECT_NE(message.find("dummy weights come in the sizes opt-125m, opt-350m"), std::string::npos)
        << message;
  }
}

TEST(ModelName, ABareConfigNameIsDummyWeightsOnlyWhereAllowed) {
  const ModelName name = resolve_model_name("opt-30b", BareConfigName::dummy_weights);
  EXPECT_EQ(name.kind, ModelName::Kind::dummy);
  EXPECT_EQ(name.spec(), "dummy:opt-30b");
  const std::string message = resolve_error("opt-125m");
  for (const char* hint : {"--model opt-125m is a config name", "--model dummy:opt-125m", "--dummy",
                           "facebook/opt-125m", "checkpoint directory"}) {
    EXPECT_NE(message.find(hint), std::string::npos) << message;
  }
}

TEST(ModelName, DirectoriesAreCheckpointsEvenWhenNamedLikeAConfig) {
  EXPECT_EQ(resolve_model_name(kFixture.string(), BareConfigName::refused).dir, kFixture);
  test::TempDir tmp;
  fs::create_directories(tmp.path() / "opt-125m");
  const fs::path before = fs::current_path();
  fs::current_path(tmp.path());
  const ModelName name = resolve_model_name("opt-125m", BareConfigName::dummy_weights);
  fs::current_path(before);
  EXPECT_EQ(name.kind, ModelName::Kind::checkpoint);
  EXPECT_EQ(name.dir, fs::path("opt-125m"));
}

TEST(ModelName, PathsThatDoNotExistAreLeftToTheCheckpointToReport) {
  const ModelName name = resolve_model_name("/no/such/model", BareConfigName::refused);
  EXPECT_EQ(name.kind, ModelName::Kind::checkpoint);
  try {
    name.config();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/model does not exist"), std::string::npos);
  }
  const std::string message = resolve_error("opt-7b");
  EXPECT_NE(message.find("no such directory"), std::string::npos) << message;
  EXPECT_NE(message.find("dummy:opt-125m, dummy:opt-350m"), std::string::npos) << message;
  EXPECT_NE(resolve_error("").find("no model given"), std::string::npos);
}

TEST(HfCache, RepoIds) {
  for (const char* id : {"facebook/opt-1.3b", "org_1/Model.v2", "a/b"}) {
    EXPECT_TRUE(is_hub_repo_id(id)) << id;
  }
  for (const char* id : {"opt-1.3b", "a/b/c", "/abs", "a/", "/b", "../x", "a/..", "a/.b", "a--b/c",
                         "a/b c", "./x"}) {
    EXPECT_FALSE(is_hub_repo_id(id)) << id;
  }
}

TEST(HfCache, TheCacheFolderFollowsHuggingfaceHub) {
  test::ScopedEnv hub("HF_HUB_CACHE", "/h/hub-cache");
  test::ScopedEnv legacy("HUGGINGFACE_HUB_CACHE", "/h/legacy");
  test::ScopedEnv home("HF_HOME", "/h/hf-home");
  test::ScopedEnv xdg("XDG_CACHE_HOME", "/h/xdg");
  test::ScopedEnv user("HOME", "/h/user");
  EXPECT_EQ(hf_hub_cache_dir(), fs::path("/h/hub-cache"));
  {
    test::ScopedEnv unset_hub("HF_HUB_CACHE", std::nullopt);
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/h/legacy"));
    test::ScopedEnv unset_legacy("HUGGINGFACE_HUB_CACHE", "");  // empty counts as unset
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/h/hf-home/hub"));
    test::ScopedEnv unset_home("HF_HOME", std::nullopt);
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/h/xdg/huggingface/hub"));
    test::ScopedEnv unset_xdg("XDG_CACHE_HOME", std::nullopt);
    EXPECT_EQ(hf_hub_cache_dir(), fs::path("/h/user/.cache/huggingface/hub"));
    test::ScopedEnv unset_user("HOME", std::nullopt);
    EXPECT_EQ(hf_hub_cache_dir(), fs::path());
  }
}

TEST(HfCache, ANameResolvesToTheSnapshotRefsMainNames) {
  test::TempDir cache;
  test::ScopedEnv env("HF_HUB_CACHE", cache.path().string());
  const fs::path main = test::add_hf_snapshot(cache.path(), "facebook/opt-tiny", kFixture, "aaaa");
  const fs::path newer = test::add_hf_snapshot(cache.path(), "facebook/opt-tiny", kFixture, "bbbb",
                                               /*write_ref=*/false);
  fs::last_write_time(newer, fs::last_write_time(main) + std::chrono::hours(1));
  const ModelName name = resolve_model_name("facebook/opt-tiny", BareConfigName::refused);
  EXPECT_EQ(name.kind, ModelName::Kind::checkpoint);
  EXPECT_EQ(name.dir, main);
  EXPECT_EQ(name.config().name, "opt-tiny");  // the model's name, not the revision's
  // The snapshot's files are links into blobs/, as huggingface_hub makes them: they read.
  const auto checkpoint = Checkpoint::open(name.dir);
  EXPECT_EQ(checkpoint->weights_file(), "pytorch_model.bin");
  EXPECT_TRUE(checkpoint->contains("decoder.layers.1.fc2.weight"));

  // Without refs/main (or naming a snapshot that is gone), the newest snapshot.
  fs::remove(cache.path() / "models--facebook--opt-tiny" / "refs" / "main");
  EXPECT_EQ(find_hf_snapshot(cache.path(), "facebook/opt-tiny"), newer);
  test::write_file(cache.path() / "models--facebook--opt-tiny" / "refs" / "main", "cccc\n");
  EXPECT_EQ(find_hf_snapshot(cache.path(), "facebook/opt-tiny"), newer);
  test::write_file(cache.path() / "models--facebook--opt-tiny" / "refs" / "main", "../../x\n");
  EXPECT_EQ(find_hf_snapshot(cache.path(), "facebook/opt-tiny"), newer);
  EXPECT_EQ(find_hf_snapshot(cache.path(), "facebook/opt-other"), std::nullopt);
}

TEST(HfCache, AMissingModelSaysWhereItLookedAndHowToDownloadIt) {
  test::TempDir cache;
  test::ScopedEnv env("HF_HUB_CACHE", cache.path().string());
  const std::string message = resolve_error("facebook/opt-1.3b");
  for (const std::string& hint :
       {std::string("--model facebook/opt-1.3b: not a directory here"),
        "the Hugging Face cache " + cache.path().string() + " has no snapshot of it",
        std::string("huggingface-cli download facebook/opt-1.3b"),
        std::string("snapshot_download('facebook/opt-1.3b'"), std::string("HF_HUB_CACHE"),
        std::string("--model dummy:opt-1.3b")}) {
    EXPECT_NE(message.find(hint), std::string::npos) << message;
  }
  // A model that is not an OPT size still gets a dummy name that exists.
  EXPECT_NE(resolve_error("someone/my-opt").find("--model dummy:opt-125m"), std::string::npos);
}

}  // namespace
}  // namespace offgen
