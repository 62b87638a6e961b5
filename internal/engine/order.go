package engine

import (
	"fmt"
	"maps"
	"slices"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// Deterministic iteration over the request's maps.
//
// Go randomises the iteration order of maps, and cel-go iterates a CEL map
// backed by a Go map in that order. exists and all have the same value in
// any order, but they stop at the first element that decides, so their
// cost depends on the order; every comprehension reports the first error
// it meets; map and filter return their lists in that order. Under the
// run-time cost limit one node could then allow a request that another
// rejects with "cost limit exceeded". Every map of the request therefore
// reaches CEL as a sortedMap, which iterates its keys in ascending order and
// leaves lookups, `in`, has() and size() to cel-go's own map.

// sortedMap is a CEL map over a Go map with string keys whose Fold and
// Iterator visit the keys in ascending order. Everything else is the
// wrapped map's.
type sortedMap struct {
	traits.Mapper
	// finder is Mapper's lookup by string key, which the interpreter uses
	// for request.headers['k'] and has(): keeping it keeps those as fast
	// as without the wrapper. nil if Mapper has none.
	finder stringKeyFinder
	// keys are built by the first iteration, so that only comprehensions
	// pay for sorting, and once per map, so that the rules of an evaluation
	// that iterate the same memoised field share them. No lock: a
	// sortedMap is built by one field access or memoised in one evalState,
	// and one evaluation runs on one goroutine.
	keys []ref.Val
}

type stringKeyFinder interface {
	FindStringKey(key string) (any, bool)
}

func newSortedMap(inner traits.Mapper) *sortedMap { return new(sortedMap).reset(inner) }

// reset makes m the sorted view of inner, forgetting any earlier keys.
func (m *sortedMap) reset(inner traits.Mapper) *sortedMap {
	f, _ := inner.(stringKeyFinder)
	*m = sortedMap{Mapper: inner, finder: f}
	return m
}

// Fold implements traits.Foldable, which comprehensions use: the entries
// in ascending key order, values only for folders that want them.
func (m *sortedMap) Fold(f traits.Folder) {
	keysOnly := false
	if k, ok := f.(interface{ FoldKeyOnly() bool }); ok {
		keysOnly = k.FoldKeyOnly()
	}
	for _, k := range m.sortedKeys() {
		var v any
		if !keysOnly {
			v = m.Get(k)
		}
		if !f.FoldEntry(k, v) {
			return
		}
	}
}

// Iterator implements traits.Iterable: the keys in ascending order.
func (m *sortedMap) Iterator() traits.Iterator {
	return types.NewRefValList(types.DefaultTypeAdapter, m.sortedKeys()).Iterator()
}

func (m *sortedMap) sortedKeys() []ref.Val {
	if m.keys == nil {
		var names []string
		if pm, ok := m.Mapper.(*pairsMap); ok {
			names = pm.p.names() // ascending already, and no map to build
		} else {
			names = ascendingKeys(m.Value())
		}
		m.keys = make([]ref.Val, len(names))
		for i, k := range names {
			m.keys[i] = types.String(k)
		}
	}
	return m.keys
}

// ascendingKeys returns the keys of the request's Go maps (query and
// headers, and attributes with the objects nested in them), the only maps
// a sortedMap wraps.
func ascendingKeys(raw any) []string {
	switch m := raw.(type) {
	case map[string]string:
		return sortedKeysOf(m)
	case map[string]any:
		return sortedKeysOf(m)
	}
	return nil
}

func sortedKeysOf[V any](m map[string]V) []string {
	keys := slices.AppendSeq(make([]string, 0, len(m)), maps.Keys(m))
	slices.Sort(keys)
	return keys
}

// FindStringKey is the interpreter's lookup for a constant key.
func (m *sortedMap) FindStringKey(key string) (any, bool) {
	if m.finder == nil {
		return m.Find(types.String(key))
	}
	return m.finder.FindStringKey(key)
}

// IsZeroValue implements traits.Zeroer, as the wrapped map does.
func (m *sortedMap) IsZeroValue() bool { return m.Size() == types.IntZero }

// sortedField reads the map field name of `request` as a sortedMap whose
// values a, the memoAdapter, converts. It builds cel-go's map itself
// rather than wrapping the native getter's, which was built with the
// registry as adapter (nested maps would not sort); from an evalState it
// uses the state's slot for the wrapper, so that the memoised value
// allocates no more than the native getter did.
func sortedField(name string, slot int, get func(any) (any, error), a types.Adapter) (fieldRead, error) {
	build := requestMap(name)
	if build == nil || slot >= maxMemoMaps {
		return fieldRead{}, fmt.Errorf("no reader for the map field %s.%s", requestTypeName, name)
	}
	return fieldRead{
		state: func(s *evalState) (any, error) {
			s.mapsUsed |= 1 << slot
			return s.maps[slot].reset(build(a, s.req)), nil
		},
		other: func(obj any) (any, error) {
			if r, ok := obj.(*Request); ok {
				return newSortedMap(build(a, r)), nil
			}
			v, err := get(obj)
			if p, ok := v.(*Pairs); ok && err == nil {
				return a.NativeToValue(p), nil
			}
			if rv, ok := v.(ref.Val); ok && err == nil {
				return resorted(a, rv), nil
			}
			return v, err
		},
	}, nil
}

// requestMap returns what builds cel-go's map over the map field of Request
// with this CEL name, or nil. newMemoRegistry fails for a map field
// without one. Query and headers are read through a pairsMap.
func requestMap(name string) func(types.Adapter, *Request) traits.Mapper {
	switch name {
	case "query":
		return func(a types.Adapter, r *Request) traits.Mapper { return newPairsMap(a, r.Query) }
	case "headers":
		return func(a types.Adapter, r *Request) traits.Mapper { return newPairsMap(a, r.Headers) }
	case "attributes":
		return func(a types.Adapter, r *Request) traits.Mapper { return types.NewStringInterfaceMap(a, r.Attributes) }
	}
	return nil
}

// resorted replaces a map that cel-go built over one of the request's Go
// maps by a sortedMap over the same map, converted by a; other values are
// returned as they are.
func resorted(a types.Adapter, v ref.Val) ref.Val {
	if _, ok := v.(*sortedMap); ok {
		return v // sorted already; asking for its Value could build a pairsMap's whole map
	}
	if m, ok := v.(traits.Mapper); ok {
		switch raw := m.Value().(type) {
		case map[string]string, map[string]any:
			return a.NativeToValue(raw)
		}
	}
	return v
}

// objectAdapter converts the fields of `request` used as a value
// (dyn(request).headers): cel-go's object builds their maps itself, and
// then passes them here, where they are rebuilt as sortedMaps over a, the
// memoAdapter.
type objectAdapter struct{ a types.Adapter }

// NativeToValue implements types.Adapter.
func (o *objectAdapter) NativeToValue(value any) ref.Val {
	return resorted(o.a, o.a.NativeToValue(value))
}
