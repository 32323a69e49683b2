#include "snapshot.hpp"

#include <unordered_map>

namespace memlens {

namespace {

struct KeyHash {
    size_t operator()(uint64_t k) const {
        k ^= k >> 33;
        k *= 0xff51afd7ed558ccdULL;
        k ^= k >> 33;
        return size_t(k);
    }
};

}  // namespace

void build(const SnapshotData& snap, const std::vector<int32_t>& file_of_code,
           const std::vector<int32_t>& function_of_code, int32_t functions, Built& out) {
    out = Built{};
    const size_t n = snap.nodes.size();
    std::vector<int32_t> fid_of(n, -1);  // native node -> collapsed node (-1: none)
    std::vector<int32_t> site_of;        // collapsed node -> site
    // (collapsed parent, site) -> collapsed node; (file, line) -> site
    std::unordered_map<uint64_t, int32_t, KeyHash> node_key, site_key;
    node_key.reserve(n);

    for (size_t id = 0; id < n; ++id) {
        const SnapshotNode& nd = snap.nodes[id];
        int32_t inherited = (id > 0 && nd.parent < n) ? fid_of[nd.parent] : -1;
        int32_t file = nd.code < file_of_code.size() ? file_of_code[nd.code] : -1;
        if (file < 0) {
            fid_of[id] = inherited;
        } else {
            int32_t line = snap.lines.line(nd.code, nd.offset);
            uint64_t skey = (uint64_t(uint32_t(file)) << 32) | uint32_t(line);
            auto s = site_key.emplace(skey, int32_t(out.site_file.size()));
            if (s.second) {
                out.site_file.push_back(file);
                out.site_line.push_back(line);
            }
            int32_t site = s.first->second;
            uint64_t nkey = (uint64_t(uint32_t(inherited + 1)) << 32) | uint32_t(site);
            auto f = node_key.emplace(nkey, int32_t(out.parent.size()));
            if (f.second) {
                out.parent.push_back(inherited);
                out.file.push_back(file);
                out.line.push_back(line);
                out.function.push_back(function_of_code[nd.code]);
                site_of.push_back(site);
            }
            fid_of[id] = f.first->second;
        }
    }
    const size_t m = out.parent.size();
    out.self.assign(m, Sums{});
    for (size_t id = 0; id < n; ++id) {
        if (fid_of[id] >= 0) {
            out.self[size_t(fid_of[id])].add(snap.nodes[id].sums);
        }
    }
    node_key = {};
    fid_of = {};

    // Subtree sums: a collapsed node's parent always precedes it.
    std::vector<Sums> sub(out.self);
    for (size_t i = m; i-- > 0;) {
        if (out.parent[i] >= 0) {
            sub[size_t(out.parent[i])].add(sub[i]);
        }
    }
    // Children lists (compressed), then a depth-first walk that counts each subtree once per
    // site and per function on its path.
    std::vector<uint32_t> first(m + 1, 0), kids(m);
    std::vector<uint32_t> roots;
    for (size_t i = 0; i < m; ++i) {
        if (out.parent[i] >= 0) {
            ++first[size_t(out.parent[i]) + 1];
        } else {
            roots.push_back(uint32_t(i));
        }
    }
    for (size_t i = 0; i < m; ++i) {
        first[i + 1] += first[i];
    }
    {
        std::vector<uint32_t> fill(first.begin(), first.end() - 1);
        for (size_t i = 0; i < m; ++i) {
            if (out.parent[i] >= 0) {
                kids[fill[size_t(out.parent[i])]++] = uint32_t(i);
            }
        }
    }
    const size_t sites = out.site_file.size();
    out.site_self.assign(sites, Sums{});
    out.site_incl.assign(sites, Sums{});
    out.function_incl.assign(size_t(functions > 0 ? functions : 0), Sums{});
    std::vector<uint32_t> site_active(sites, 0), func_active(out.function_incl.size(), 0);
    struct Frame {
        uint32_t node;
        uint32_t next_child;
    };
    std::vector<Frame> walk;
    auto enter = [&](uint32_t i) {
        uint32_t site = uint32_t(site_of[i]);
        int32_t fn = out.function[i];
        out.site_self[site].add(out.self[i]);
        if (site_active[site]++ == 0) {
            out.site_incl[site].add(sub[i]);
        }
        if (fn >= 0 && size_t(fn) < func_active.size() && func_active[size_t(fn)]++ == 0) {
            out.function_incl[size_t(fn)].add(sub[i]);
        }
        walk.push_back(Frame{i, first[i]});
    };
    for (uint32_t r : roots) {
        enter(r);
        while (!walk.empty()) {
            Frame& top = walk.back();
            if (top.next_child < first[top.node + 1]) {
                enter(kids[top.next_child++]);
                continue;
            }
            uint32_t i = top.node;
            walk.pop_back();
            --site_active[uint32_t(site_of[i])];
            int32_t fn = out.function[i];
            if (fn >= 0 && size_t(fn) < func_active.size()) {
                --func_active[size_t(fn)];
            }
        }
    }
}

}  // namespace memlens
