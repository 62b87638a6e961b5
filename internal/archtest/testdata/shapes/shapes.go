package shapes

type T struct{}

func (T) Value()    {}
func (t *T) Point() {}

type G[K comparable] struct{}

func (g *G[K]) One() {}

type P[K, V any] struct{}

func (p P[K, V]) Two() {}

func Free() {}
