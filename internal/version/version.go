// Package version names this build's release and compares the releases of
// a cluster's members, so the leader proposes only what every member can
// apply (the cluster version, as etcd calls it).
package version

import (
	"fmt"
	"strconv"
	"strings"
)

// Current is the release this build is. RELEASES at the repository's root
// lists the releases before it with their commits.
const Current = "1.1.0"

// Oldest is the first release. A node that reports no semantic version
// (v1.0.0 reported "dev" or a commit) runs it, as far as the cluster can
// tell: counting it as the oldest never turns on a feature it lacks.
const Oldest = "1.0.0"

// V is a semantic version without pre-release or build parts, which the
// cluster version never needs.
type V struct{ Major, Minor, Patch int }

// Parse reads "1.2.3" or "v1.2.3"; anything after a '-' or '+' (a
// pre-release or build suffix) is dropped.
func Parse(s string) (V, error) {
	s = strings.TrimPrefix(s, "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return V{}, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 1<<20 || (len(p) > 1 && p[0] == '0') {
			return V{}, fmt.Errorf("version %q: %q is not a number", s, p)
		}
		n[i] = v
	}
	return V{n[0], n[1], n[2]}, nil
}

// Must parses a version this build names itself; it panics on a typo.
func Must(s string) V {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

// Of is the version a node reported, or Oldest when it reported none that
// parses.
func Of(s string) V {
	if v, err := Parse(s); err == nil {
		return v
	}
	return Must(Oldest)
}

// This is Current, parsed.
func This() V { return Must(Current) }

// Compare returns -1, 0 or 1 as v is below, equal to or above o.
func (v V) Compare(o V) int {
	for _, d := range [3]int{v.Major - o.Major, v.Minor - o.Minor, v.Patch - o.Patch} {
		if d != 0 {
			if d < 0 {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Less reports whether v is below o.
func (v V) Less(o V) bool { return v.Compare(o) < 0 }

// String formats v as MAJOR.MINOR.PATCH.
func (v V) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Lowest is the lowest of the reported versions (each through Of), or
// This when there are none.
func Lowest(reported []string) V {
	low := This()
	for _, r := range reported {
		if v := Of(r); v.Less(low) {
			low = v
		}
	}
	return low
}

// OldestPeer is the oldest release this build shares a log with: it
// writes nothing such a node cannot apply while one is a voter (the
// feature table), and applies everything it writes.
const OldestPeer = Oldest

// Skew says why a node running v must not serve in a cluster whose
// version (its voters' lowest release) is cluster, or "" when it may. A
// node may be at most one minor release ahead of the cluster (upgrade one
// release at a time, as etcd asks), never on another major release, and
// not older than OldestPeer, whose entries it may not apply.
func Skew(v, cluster V) string {
	switch {
	case v.Less(Must(OldestPeer)):
		return fmt.Sprintf("runs %s, older than %s, the oldest release %s runs beside: upgrade it", v, OldestPeer, Current)
	case v.Major != cluster.Major:
		return fmt.Sprintf("runs %s, another major release than the cluster's %s: run %d.x on it", v, cluster, cluster.Major)
	case v.Minor > cluster.Minor+1:
		return fmt.Sprintf("runs %s, more than one minor release ahead of the cluster's %s: upgrade the others first",
			v, cluster)
	}
	return ""
}
