package engine

import (
	"fmt"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Per-evaluation field values.
//
// ext.NativeTypes reads a field of `request` by building its CEL value on
// every access: a map or list wrapper for headers, query, groups and
// attributes, a boxed string for the others. A policy whose rules test
// headers or groups therefore built the same wrappers once per rule. An
// Evaluate call binds `request` to an evalState instead, and the field
// getters of the environment (memoRegistry) build each field's value at
// most once per evaluation and hand out the same value afterwards. Values
// are immutable CEL values over the read-only request, so sharing them
// between the rules of one evaluation cannot change a result; they are
// never shared between evaluations (the state is reset before it returns
// to its pool).

// maxMemoFields bounds the fields of Request that have a memo slot.
const maxMemoFields = 32

// maxMemoMaps bounds the fields of Request that are maps (order.go).
const maxMemoMaps = 4

// evalState is the activation of one Evaluate call: `request` resolves to
// the state itself, which the memoised field getters recognise. It also
// lends the rule index scratch space for combining sets.
type evalState struct {
	req  *Request
	have uint32 // bit i: vals[i] is built
	vals [maxMemoFields]any
	// maps holds the sortedMaps of the memoised map fields, so that they
	// cost no allocation of their own (order.go); bit i of mapsUsed: maps[i]
	// is set.
	maps     [maxMemoMaps]sortedMap
	mapsUsed uint8
	buf      []uint64 // scratch bitsets, see scratch
	used     int      // words of buf handed out
}

var _ interpreter.Activation = (*evalState)(nil)

var statePool = sync.Pool{New: func() any { return new(evalState) }}

// newEvalState takes a state from the pool for req; release returns it.
func newEvalState(req *Request) *evalState {
	s := statePool.Get().(*evalState)
	s.req = req
	return s
}

// release forgets the request and its values, so that the pool keeps
// neither alive, and returns the state to the pool.
func (s *evalState) release() {
	s.req, s.have, s.used = nil, 0, 0
	clear(s.vals[:])
	if s.mapsUsed != 0 {
		s.maps, s.mapsUsed = [maxMemoMaps]sortedMap{}, 0
	}
	statePool.Put(s)
}

// scratch returns n zeroed words that stay valid until release.
func (s *evalState) scratch(n int) bitset {
	if s.used+n > len(s.buf) {
		// Earlier slices keep pointing into the old buffer, which is fine:
		// they are only read, and the new buffer is big enough for a few
		// more sets of this policy.
		s.buf, s.used = make([]uint64, 4*n), 0
	}
	b := bitset(s.buf[s.used : s.used+n : s.used+n])
	s.used += n
	clear(b)
	return b
}

// ResolveName implements interpreter.Activation.
func (s *evalState) ResolveName(name string) (any, bool) {
	if name == requestVar {
		return s, true
	}
	return nil, false
}

// Parent implements interpreter.Activation; there is no enclosing scope.
func (s *evalState) Parent() interpreter.Activation { return nil }

// memoRegistry is the environment's type registry with the fields of
// Request read through memoField. memoAdapter turns an evalState back into
// the request for a match that uses `request` as a value (dyn(request),
// [request]). Everything else is the registry's and the adapter's.
type memoRegistry struct {
	*types.Registry
	fields map[string]*types.FieldType
}

type memoAdapter struct {
	types.Adapter
	// request is Request's native type in the registry, which builds
	// `request` as a value, with fields converted by object (order.go).
	request *types.NativeType
	object  *objectAdapter
}

// memoFields installs memoRegistry and memoAdapter; it must be the last
// option that changes types, so that it wraps the complete registry.
func memoFields() cel.EnvOption {
	return func(e *cel.Env) (*cel.Env, error) {
		reg, ok := e.CELTypeProvider().(*types.Registry)
		if !ok {
			return nil, fmt.Errorf("memoFields: the type provider is a %T, not a registry", e.CELTypeProvider())
		}
		nt, ok := reg.NativeToValue(&Request{}).Type().(*types.NativeType)
		if !ok {
			return nil, fmt.Errorf("memoFields: %s is not a native type", requestTypeName)
		}
		a := &memoAdapter{Adapter: e.CELTypeAdapter(), request: nt}
		a.object = &objectAdapter{a}
		m, err := newMemoRegistry(reg, a)
		if err != nil {
			return nil, err
		}
		if e, err = cel.CustomTypeAdapter(a)(e); err != nil {
			return nil, err
		}
		return cel.CustomTypeProvider(m)(e)
	}
}

// newMemoRegistry wraps the getter of every field of Request; those of map
// fields also make the maps sortedMaps converting through a (order.go).
func newMemoRegistry(reg *types.Registry, a *memoAdapter) (*memoRegistry, error) {
	names, ok := reg.FindStructFieldNames(requestTypeName)
	if !ok || len(names) > maxMemoFields {
		return nil, fmt.Errorf("memoFields: %s has %d fields", requestTypeName, len(names))
	}
	m := &memoRegistry{Registry: reg, fields: make(map[string]*types.FieldType, len(names))}
	maps := 0
	for i, name := range names {
		ft, ok := reg.FindStructFieldType(requestTypeName, name)
		if !ok || ft.GetFrom == nil || ft.IsSet == nil {
			return nil, fmt.Errorf("memoFields: no getter for %s.%s", requestTypeName, name)
		}
		read := fieldRead{other: ft.GetFrom}
		if ft.Type.TypeName() == pairsTypeName {
			ft = asStringMapField(ft)
		}
		if ft.Type.Kind() == types.MapKind {
			var err error
			if read, err = sortedField(name, maps, ft.GetFrom, a); err != nil {
				return nil, fmt.Errorf("memoFields: %w", err)
			}
			maps++
		}
		m.fields[name] = memoField(ft, i, read)
	}
	return m, nil
}

// pairsTypeName is the CEL object type ext.NativeTypes makes of Pairs,
// which no match sees: every field of that type is declared a map.
const pairsTypeName = "engine.Pairs"

// asStringMapField declares a field of type Pairs as what it stands for,
// map(string, string); whether it is set stays the native test (a nil
// list is absent, as a nil map was).
func asStringMapField(ft *types.FieldType) *types.FieldType {
	out := *ft
	out.Type = types.NewMapType(types.StringType, types.StringType)
	return &out
}

// FindStructFieldType implements types.Provider.
func (m *memoRegistry) FindStructFieldType(structType, fieldName string) (*types.FieldType, bool) {
	if structType == requestTypeName {
		if ft, ok := m.fields[fieldName]; ok {
			return ft, true
		}
	}
	return m.Registry.FindStructFieldType(structType, fieldName)
}

// NativeToValue implements types.Adapter. The request as a value, an
// evalState or not, is cel-go's object for it, reading its fields through
// an objectAdapter. The request's Go maps become sortedMaps, and they and
// its lists convert their elements here, so that nested maps sort too
// (order.go). One switch on concrete types: this runs for every value a
// rule reads.
func (a *memoAdapter) NativeToValue(value any) ref.Val {
	switch v := value.(type) {
	case *evalState:
		return a.request.Adapt(a.object, v.req)
	case *Request:
		return a.request.Adapt(a.object, v)
	case map[string]string:
		return newSortedMap(types.NewStringStringMap(a, v))
	case *Pairs: // a field of request read by cel-go's getter
		return newSortedMap(newPairsMap(a, *v))
	case Pairs: // a field of request used as a value
		return newSortedMap(newPairsMap(a, v))
	case map[string]any:
		return newSortedMap(types.NewStringInterfaceMap(a, v))
	case []any:
		return types.NewList(a, v)
	}
	return a.Adapter.NativeToValue(value)
}

// fieldRead builds the CEL value of a field of `request`: state from the
// request of an evalState (nil: the native getter's value), other from any
// other object (a *Request bound by activation, a request value inside a
// list).
type fieldRead struct {
	state func(*evalState) (any, error)
	other func(obj any) (any, error)
}

// memoField wraps the native getter of the field in memo slot i: values
// built from an evalState are memoised in it, other objects are read as
// read.other says.
func memoField(ft *types.FieldType, i int, read fieldRead) *types.FieldType {
	isSet := ft.IsSet
	bit := uint32(1) << i
	out := *ft
	out.IsSet = func(obj any) bool {
		if s, ok := obj.(*evalState); ok {
			obj = s.req
		}
		return isSet(obj)
	}
	out.GetFrom = func(obj any) (any, error) {
		s, ok := obj.(*evalState)
		if !ok {
			return read.other(obj)
		}
		if s.have&bit != 0 {
			return s.vals[i], nil
		}
		var v any
		var err error
		if read.state == nil {
			v, err = ft.GetFrom(s.req)
		} else {
			v, err = read.state(s)
		}
		if err == nil {
			s.vals[i] = v
			s.have |= bit
		}
		return v, err
	}
	return &out
}
