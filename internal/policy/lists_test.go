package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const listPolicy = "default_action = \"allow\"\n[[rules]]\nname = \"block\"\npriority = 1\naction = \"deny\"\nmatch = \"inIpList(request.source_ip, 'blocklist')\"\n"

// cidrs returns n distinct IPv4 /32 and IPv6 /64 entries, one a line.
func cidrs(n int) []byte {
	var b strings.Builder
	for i := range n {
		if i%2 == 0 {
			fmt.Fprintf(&b, "10.%d.%d.%d/32\n", i>>16&255, i>>8&255, i&255)
		} else {
			fmt.Fprintf(&b, "2001:db8:%x:%x::/64\n", i>>16, i&0xffff)
		}
	}
	return []byte(b.String())
}

// Before lists, 20,000 CIDRs as code were over the policy budgets; as a
// list they are data, counted by the list budgets.
func TestListOf20000CIDRsLoads(t *testing.T) {
	files := map[string][]byte{"edge/policy.toml": []byte(listPolicy), "_lists/blocklist.netset": cidrs(20_000)}
	repo, err := Load(TreeFS(files), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := repo.Get("edge").Lists["blocklist"]
	if l == nil || l.Entries != 20_000 || l.Kind != ListIP {
		t.Fatalf("list = %+v", l)
	}
}

// A list bigger than the 8 MiB tree budget is not refused by it: the list
// budgets count it.
func TestTreeBytesDoNotCountLists(t *testing.T) {
	big := cidrs(500_000) // about 11 MB
	if len(big) <= MaxTreeBytes {
		t.Fatalf("list of %d bytes does not exceed MaxTreeBytes", len(big))
	}
	files := map[string][]byte{"edge/policy.toml": []byte(listPolicy), "_lists/blocklist.netset": big}
	if e := CheckTree(files); e != nil {
		t.Fatalf("CheckTree: %v", e)
	}
	dir := t.TempDir()
	writeFiles(t, dir, files)
	got, err := ReadTree(os.DirFS(dir))
	if err != nil || len(got["_lists/blocklist.netset"]) != len(big) {
		t.Fatalf("ReadTree: %v", err)
	}
	// Other files still count against MaxTreeBytes.
	files["edge/big.bin"] = make([]byte, MaxTreeBytes)
	if e := CheckTree(files); e == nil || !strings.Contains(e.Msg, fmt.Sprint(MaxTreeBytes)) {
		t.Fatalf("CheckTree of a tree over MaxTreeBytes outside _lists: %v", e)
	}
}

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMalformedLineNamesFileAndLine(t *testing.T) {
	data := append(cidrs(1023), []byte("# comment\n10.0.0.0/33\n")...)
	_, errs := LoadLists(TreeFS(map[string][]byte{"_lists/blocklist.netset": data}))
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), `_lists/blocklist.netset:1025: "10.0.0.0/33": `) {
		t.Fatalf("got %v", errs)
	}
}

// Hostile lists from a pull request are refused with the budget named,
// at a cost bounded by the budgets (a sparse 1 GB file is not read).
func TestHostileListsRefusedWithBudgetNamed(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"edge/policy.toml": []byte(listPolicy)})
	huge := filepath.Join(dir, "_lists", "huge.netset")
	if err := os.MkdirAll(filepath.Dir(huge), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(huge, nil, 0o644); err != nil || os.Truncate(huge, 1<<30) != nil {
		t.Fatal("making a sparse file", err)
	}
	if _, err := ReadTree(os.DirFS(dir)); !errors.Is(err, ErrTreeTooLarge) || !strings.Contains(err.Error(), "MaxListFileBytes") {
		t.Fatalf("ReadTree of a 1 GB list: %v", err)
	}
	if _, errs := LoadLists(os.DirFS(dir)); len(errs) != 1 || !strings.Contains(errs.Error(), "MaxListFileBytes") {
		t.Fatalf("LoadLists of a 1 GB list: %v", errs)
	}

	many := []byte(strings.Repeat("1.2.3.4\n", MaxListEntries+1))
	cases := map[string]struct {
		data []byte
		want string
	}{
		"_lists/many.netset":  {many, "(MaxListEntries)"},
		"_lists/long.txt":     {append([]byte("ok\n"), make([]byte, 1<<20)...), "_lists/long.txt:2: \"\\x00\\x00"},
		"_lists/binary.txt":   {[]byte("\x7fELF\x02\x01\x01\x00"), "_lists/binary.txt:1: "},
		"_lists/Upper.netset": {[]byte("10.0.0.0/8\n"), "must match [a-z0-9-]+"},
		"_lists/x.csv":        {[]byte("a\n"), "not a list"},
	}
	for name, c := range cases {
		_, errs := LoadLists(TreeFS(map[string][]byte{name: c.data}))
		if len(errs) == 0 || !strings.Contains(errs.Error(), c.want) || len(errs.Error()) > 600 {
			t.Errorf("%s: got %.600v, want %q", name, errs, c.want)
		}
	}
	_, errs := LoadLists(TreeFS(map[string][]byte{"_lists/long.txt": append([]byte("ok\n"), []byte(strings.Repeat("a", 1<<20))...)}))
	if !strings.Contains(errs.Error(), "(MaxListLineBytes)") {
		t.Errorf("a 1 MB line: %v", errs)
	}
}

// Overlapping and duplicate entries and ::/0 are valid data.
func TestOverlapsDuplicatesAndAllOfIPv6Load(t *testing.T) {
	ls, errs := LoadLists(TreeFS(map[string][]byte{"_lists/all.netset": []byte("::/0\n10.0.0.0/8\n10.0.0.0/8\n10.1.0.0/16\n0.0.0.0/0\n")}))
	if errs != nil || ls["all"].Entries != 5 {
		t.Fatalf("%v %+v", errs, ls["all"])
	}
}

// A policy's etag changes when a list it uses changes, and only then.
func TestListChangeIsNewEtag(t *testing.T) {
	load := func(list string) (*Policy, *Policy) {
		files := map[string][]byte{"edge/policy.toml": []byte(listPolicy), "other/policy.toml": []byte("default_action = \"allow\"\n"),
			"_lists/blocklist.netset": []byte(list)}
		repo, err := Load(TreeFS(files), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return repo.Get("edge"), repo.Get("other")
	}
	e1, o1 := load("10.0.0.0/8\n")
	e2, o2 := load("10.0.0.0/8\n11.0.0.0/8\n")
	if e1.Etag() == e2.Etag() {
		t.Error("etag of the policy using the list did not change with the list")
	}
	if o1.Etag() != o2.Etag() {
		t.Error("etag of a policy not using the list changed")
	}
	if strings.Contains(string(o1.Canonical()), `"lists"`) || !strings.Contains(string(e1.Canonical()), `"lists":{"blocklist":"`) {
		t.Errorf("canonical forms: %s / %s", o1.Canonical(), e1.Canonical())
	}
	// LoadPolicy (an experiment's one policy) attaches the same lists.
	p, err := LoadPolicy(TreeFS(map[string][]byte{"edge/policy.toml": []byte(listPolicy), "_lists/blocklist.netset": []byte("10.0.0.0/8\n")}), "edge", LoadOptions{})
	if err != nil || p.Etag() != e1.Etag() {
		t.Fatalf("LoadPolicy: %v, etag %s want %s", err, p.Etag(), e1.Etag())
	}
}
