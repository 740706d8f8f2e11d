// examples/train_mlp/launch.hpp: how the processes start together: one rank's failure ends all, and
// under MPI the ranks agree on their settings before training. Part of train_mlp (main.cpp includes
// it; one translation unit).
#pragma once

#include "checks.hpp"

namespace {

// A failure before training that may be this rank's alone (a file it cannot read). Rank 0 has
// printed the message already; another rank prints its own, since it may be the only one that
// failed. Under MPI the other ranks would wait for this one in their first collective, so all
// are ended.
int fail_alone(int status, int rank, int ranks, const std::string& message) {
  if (rank != 0) std::fprintf(stderr, "train_mlp: rank %d: %s\n", rank, message.c_str());
#if defined(GROVE_TRAIN_MLP_MPI)
  if (ranks > 1) {
    std::fflush(stderr);
    grove::mpi::Environment::abort(status);
  }
#else
  (void)ranks;
#endif
  return status;
}

#if defined(GROVE_TRAIN_MLP_MPI)
// The settings every MPI rank must share, as (flag, value) pairs: those that decide what each
// rank computes, and the sizes of the dataset it read. A flag added to train_mlp that changes the
// computation belongs here too.
std::vector<std::pair<std::string, std::string>> shared_settings(
    const Options& o, double lr, const grove::data::mnist_splits<float>& data) {
  return {{"--epochs", std::to_string(o.epochs)},
          {"--batch-size", std::to_string(o.batch_size)},
          {"--data", o.data},
          {"--seed", std::to_string(o.seed)},
          {"--lr", exact(lr)},
          {"--lr-decay", exact(o.lr_decay)},
          {"--optimizer", o.optimizer},
          {"--schedule", o.schedule},
          {"--warmup-steps", std::to_string(o.warmup_steps)},
          {"--weight-decay", o.weight_decay ? exact(*o.weight_decay) : "none"},
          {"--clip-norm", o.clip_norm ? exact(*o.clip_norm) : "none"},
          {"--standardize", o.standardize ? "yes" : "no (--no-standardize)"},
          {"--layers", layers_text(o.layers)},
          {"--activation", o.activation},
          {"--dropout", exact(o.dropout)},
          {"--layer-norm", o.layer_norm ? "yes" : "no"},
          {"--residual", o.residual ? "yes" : "no"},
          {"--precision", o.precision},
          {"--resume", o.resume.empty() ? "none" : o.resume},
          {"training images", std::to_string(data.train.size())},
          {"test images", std::to_string(data.test.size())},
          {"pixels per image", std::to_string(data.train.inputs.rows())}};
}

// Every rank's `text`, on every rank (one MPI_Allgather of the lengths, one MPI_Allgatherv).
std::vector<std::string> allgather_text(grove::mpi::Communicator& comm, const std::string& text) {
  const int size = comm.size();
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<std::size_t>(size));
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm.native());
  std::vector<int> starts(static_cast<std::size_t>(size), 0);
  for (int r = 1; r < size; ++r)
    starts[static_cast<std::size_t>(r)] =
        starts[static_cast<std::size_t>(r - 1)] + lengths[static_cast<std::size_t>(r - 1)];
  std::string all(static_cast<std::size_t>(starts.back() + lengths.back()), '\0');
  MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), starts.data(), MPI_CHAR,
                 comm.native());
  std::vector<std::string> texts;
  for (int r = 0; r < size; ++r)
    texts.push_back(all.substr(static_cast<std::size_t>(starts[static_cast<std::size_t>(r)]),
                               static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)])));
  return texts;
}

// Every rank gathers every rank's settings (one allgather of their text) and compares them, so
// that all of them see the same disagreements. Returns them, one line each, naming the setting,
// a rank that differs from rank 0 and both values; empty when all agree.
std::string settings_disagreement(grove::mpi::Communicator& comm,
                                  const std::vector<std::pair<std::string, std::string>>& mine) {
  std::string text;
  for (const auto& [flag, value] : mine) {
    text += value;
    text += '\0';
  }
  const auto all = allgather_text(comm, text);
  const int size = comm.size();
  auto values_of = [&](int r) {
    std::vector<std::string> values;
    std::string_view rest(all[static_cast<std::size_t>(r)]);
    for (std::size_t nul; (nul = rest.find('\0')) != std::string_view::npos;) {
      values.emplace_back(rest.substr(0, nul));
      rest.remove_prefix(nul + 1);
    }
    return values;
  };
  const auto first = values_of(0);
  std::string problems;
  for (int r = 1; r < size; ++r) {
    const auto other = values_of(r);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const std::string a = i < first.size() ? first[i] : "?";
      const std::string b = i < other.size() ? other[i] : "?";
      if (a != b)
        problems += "\n  " + mine[i].first + ": rank 0 has " + a.substr(0, 64) + ", rank " +
                    std::to_string(r) + " has " + b.substr(0, 64);
    }
  }
  return problems;
}
#endif

// How a process's start went: its flags parsed and checked, --help printed, or a usage error.
enum class Launch { ready = 0, helped = 1, refused = 2 };

// Every process has parsed and checked its flags: returns -1 when the run goes on, else the
// status to exit with (0 after --help, 2 after a usage error). Under MPI the ranks first learn
// how each one's start went (one allgather, which every rank reaches, since the checks before it
// are its own), so that a rank started with a bad flag ends them all at once, instead of leaving
// the others waiting for it in their first collective. Each message is printed once: a rank's
// own is prefixed with it ("train_mlp: rank 1: ...") unless every rank has the same one, and a
// rank that could start says why it does not.
#if defined(GROVE_TRAIN_MLP_MPI)
int agree_to_start(Launch mine, const std::string& problem, int rank, int ranks,
                   grove::mpi::Communicator* world) {
#else
int agree_to_start(Launch mine, const std::string& problem, int rank, int ranks) {
#endif
  if (ranks == 1) {
    if (mine == Launch::refused) std::fprintf(stderr, "train_mlp: %s\n", problem.c_str());
    return mine == Launch::ready ? -1 : mine == Launch::helped ? 0 : 2;
  }
#if defined(GROVE_TRAIN_MLP_MPI)
  const auto all =
      allgather_text(*world, static_cast<char>('0' + static_cast<int>(mine)) + problem);
  std::vector<int> refused, helped, ready;
  for (int r = 0; r < ranks; ++r) {
    const char code =
        all[static_cast<std::size_t>(r)].empty() ? '2' : all[static_cast<std::size_t>(r)][0];
    (code == '2' ? refused : code == '1' ? helped : ready).push_back(r);
  }
  if (refused.empty() && helped.empty()) return -1;
  if (mine == Launch::refused) {
    const bool shared =
        refused.size() == static_cast<std::size_t>(ranks) &&
        std::all_of(all.begin(), all.end(), [&](const std::string& t) { return t == all[0]; });
    if (shared) {
      if (rank == 0) std::fprintf(stderr, "train_mlp: %s\n", problem.c_str());
    } else if (rank == 0 || all[static_cast<std::size_t>(rank)] != all[0]) {
      std::fprintf(stderr, "train_mlp: rank %d: %s\n", rank, problem.c_str());
    }
    return 2;
  }
  if (refused.empty() && ready.empty()) return 0;  // every rank printed --help
  // This rank could start: the lowest such rank says why none does.
  if (mine == Launch::ready && rank == ready.front()) {
    const auto& why = refused.empty() ? helped : refused;
    std::string list;
    for (const int r : why) list += (list.empty() ? "" : ", ") + std::to_string(r);
    std::fprintf(stderr, "train_mlp: rank %d: not training, since rank%s %s %s\n", rank,
                 why.size() == 1 ? "" : "s", list.c_str(),
                 refused.empty() ? "was given --help (start every rank with the same flags)"
                                 : "could not start (see its message)");
  }
  return 2;
#else
  (void)rank;
  return 2;
#endif
}

}  // namespace
