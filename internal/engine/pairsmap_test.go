package engine

import (
	"fmt"
	"reflect"
	"testing"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// TestPairsMapAgreesWithCELMap compares pairsMap with cel-go's map over
// the same Go map, key by key (strings present and missing, keys of other
// types), and checks that lookups and size() never build the whole map:
// a rule reading dyn(request).headers['k'] in a loop gets a new pairsMap
// per access, and building every header's entry each time would make a
// match cost a multiple of what the cost limit counts.
func TestPairsMapAgreesWithCELMap(t *testing.T) {
	for _, n := range []int{0, 1, 3, scanPairs + 1, 60} {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("x-k%02d", i)] = fmt.Sprint("v", i)
		}
		want := types.NewStringStringMap(types.DefaultTypeAdapter, m)
		got := newPairsMap(types.DefaultTypeAdapter, PairsOf(m))
		keys := []ref.Val{types.String("x-k00"), types.String("x-k01"), types.String("missing"), types.String(""),
			types.Int(1), types.Bool(true), types.NullValue}
		for _, k := range keys {
			gv, gok := got.Find(k)
			wv, wok := want.Find(k)
			if gok != wok || (gok && gv.Equal(wv) != types.True) {
				t.Errorf("n=%d: Find(%v) = %v, %v; cel-go's map %v, %v", n, k, gv, gok, wv, wok)
			}
			if g, w := got.Contains(k), want.Contains(k); g != w {
				t.Errorf("n=%d: Contains(%v) = %v, want %v", n, k, g, w)
			}
			if g, w := got.Get(k), want.Get(k); fmt.Sprint(g) != fmt.Sprint(w) {
				t.Errorf("n=%d: Get(%v) = %v, want %v", n, k, g, w)
			}
			if s, ok := k.(types.String); ok {
				gv, gok := got.FindStringKey(string(s))
				wv, wok := want.(stringKeyFinder).FindStringKey(string(s))
				if gok != wok || (gok && fmt.Sprint(gv) != fmt.Sprint(wv)) {
					t.Errorf("n=%d: FindStringKey(%v) = %v, %v; want %v, %v", n, s, gv, gok, wv, wok)
				}
			}
		}
		if got.Size() != want.Size() || got.IsZeroValue() != (n == 0) || got.Type() != want.Type() ||
			got.ConvertToType(types.TypeType) != want.ConvertToType(types.TypeType) {
			t.Errorf("n=%d: Size %v, Type %v", n, got.Size(), got.Type())
		}
		if got.full != nil {
			t.Fatalf("n=%d: a lookup or size() built the whole map", n)
		}
		if got.Equal(want) != types.True || want.Equal(got) != types.True || !reflect.DeepEqual(got.Value(), m) {
			t.Errorf("n=%d: not equal to cel-go's map over the same entries", n)
		}
		sorted := newSortedMap(newPairsMap(types.DefaultTypeAdapter, PairsOf(m)))
		var seen []string
		sorted.Fold(folder(func(k, v any) bool {
			seen = append(seen, fmt.Sprint(k, "=", v))
			return true
		}))
		if len(seen) != n || sorted.Mapper.(*pairsMap).full != nil {
			t.Errorf("n=%d: Fold visited %d entries, whole map built %v", n, len(seen), sorted.Mapper.(*pairsMap).full != nil)
		}
	}
}

type folder func(k, v any) bool

func (f folder) FoldEntry(k, v any) bool { return f(k, v) }

var _ traits.Folder = folder(nil)
