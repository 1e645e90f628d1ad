// A C++ guest of the C SDK's tests: the golden vectors one_key_one_message
// (computation "upper") and unicode ("echo"), written with std::string to
// show that the header and the libc++ link work from C++.
#include <string>

#include "flowhost.h"

int flowhost_process_key(fh_key *k) {
    const std::string computation = fh_batch_of(k)->computation;
    const fh_message *m;
    while ((m = fh_next_message(k)) != nullptr) {
        std::string payload(reinterpret_cast<const char *>(m->payload), m->payload_len);
        if (computation == "upper") {
            for (char &c : payload) {
                if (c >= 'a' && c <= 'z') {
                    c = static_cast<char>(c - 'a' + 'A');
                }
            }
            fh_emit(k, "out", payload.data(), payload.size());
            continue;
        }
        fh_emit_opts opts{};
        opts.key = fh_key_text(k, nullptr);
        fh_emit_with(k, "echo", payload.data(), payload.size(), &opts);
    }
    return 0;
}
