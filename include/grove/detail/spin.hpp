// grove/detail/spin.hpp: the pause a spinning wait makes between two looks at what it waits for,
// shared by the thread teams of the threaded passes and by LocalDevices.
#pragma once

namespace grove::detail {

/// Tells the CPU that this is a spin-wait loop (x86's pause, ARM's yield): it frees the core's
/// resources for the other hardware thread and avoids the memory-order flush on leaving the loop.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace grove::detail
