{
  # One addon: the Node-API binding plus the whole native engine (C++20), with the CUDA kernels embedded as
  # fatbins (cuda/src/backend/cuda/kernels_fatbin.inc, made by scripts/build-cuda.mjs; docs/architecture.md).
  "targets": [
    {
      "target_name": "vtengine",
      "sources": [
        "<!@(node -p \"require('fs').readdirSync('binding').filter(f=>f.endsWith('.cpp')).map(f=>'binding/'+f).join(' ')\")",
        "<!@(node -p \"require('fs').readdirSync('binding/workers').filter(f=>f.endsWith('.cpp')).map(f=>'binding/workers/'+f).join(' ')\")",
        "<!@(node scripts/native-sources.mjs)"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "binding",
        "cuda/include",
        "cuda/src",
        "third_party/nlohmann/include"
      ],
      # NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS: a callback that runs while its environment is ending (a worker's
      # process.exit() or terminate()) cannot throw into JS; without it node-addon-api turns that into
      # std::terminate (SIGABRT). With it the exception is dropped, as there is nobody left to catch it.
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED",
                  "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17", "-std=gnu++1y"],
      "cflags_cc": ["-std=c++20", "-fexceptions", "-O3", "-fno-math-errno", "-Wall", "-Wno-unused-parameter"],
      "ldflags": ["-pthread", "-ldl"],
      "conditions": [
        ["OS=='linux'", { "cflags_cc": ["-pthread", "-fvisibility=hidden"] }],
        # Prebuilds (scripts/prebuild.mjs sets VTENGINE_STATIC_RUNTIME=1): libstdc++ and libgcc linked in, so the
        # binary needs nothing of the compiler on the user's machine, only glibc (<= 2.34, checked by
        # test/package/prebuild-binaries.test.ts; binding/glibc_compat.cpp). --exclude-libs keeps their symbols
        # out of the dynamic table: the addon's calls bind to its own copy, never to the host's libstdc++.
        ["OS=='linux' and '<!(node -p \"process.env.VTENGINE_STATIC_RUNTIME || 0\")'=='1'",
         { "ldflags": ["-static-libstdc++", "-static-libgcc", "-Wl,--exclude-libs,ALL"] }]
      ]
    }
  ]
}
