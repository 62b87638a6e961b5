package preview

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// maxShownLists and maxShownSources bound the list and source address rows
// of one section; a section is kept whole or cut whole (Report.markdown).
const (
	maxShownLists   = 10
	maxShownSources = 5
)

// mdLists writes what the experiment does to each named list: the names
// come from the pull request, so they are shown as code, clipped.
func mdLists(b *strings.Builder, changes []ListChange) {
	if len(changes) == 0 {
		return
	}
	b.WriteString("| List | File | Added | Removed | Entries |\n|---|---|--:|--:|--:|\n")
	for i, c := range changes {
		if i == maxShownLists {
			fmt.Fprintf(b, "| %d more lists | | | | |\n", len(changes)-i)
			break
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d |\n", cellCode(clip(c.Name, maxShownName)), cellCode(clip(c.File, maxShownName)),
			c.Added, c.Removed, c.Entries)
	}
	b.WriteString("\n")
}

// SourceCount is how many of the kept sample changes came from one source
// address, as the redaction rules left it.
type SourceCount struct {
	Address string `json:"address"`
	Count   int    `json:"count"`
}

// TopSources counts the source addresses of st's sample changes (already
// redacted: an address the rules hide is counted as what they show),
// most frequent first, at most maxShownSources.
func TopSources(st Stats) []SourceCount {
	counts := map[string]int{}
	for _, s := range st.Samples {
		if a, ok := s.Request["source_ip"].(string); ok && a != "" {
			counts[a]++
		}
	}
	out := make([]SourceCount, 0, len(counts))
	for a, n := range counts {
		out = append(out, SourceCount{Address: a, Count: n})
	}
	slices.SortFunc(out, func(x, y SourceCount) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Address, y.Address))
	})
	return out[:min(len(out), maxShownSources)]
}

func mdSources(b *strings.Builder, st Stats) {
	top := TopSources(st)
	if len(top) == 0 {
		return
	}
	fmt.Fprintf(b, "Top source addresses of the sample changes (%d kept, redacted):\n\n| Source | Changes |\n|---|--:|\n", len(st.Samples))
	for _, s := range top {
		fmt.Fprintf(b, "| %s | %d |\n", cellCode(clip(s.Address, maxShownName)), s.Count)
	}
	b.WriteString("\n")
}
