package shapes

func (T) NotCounted() {}
