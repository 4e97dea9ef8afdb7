package harness

// HandOutPorts makes the harness choose ports with pick until restore is
// called, so that a test can hand a server a taken port.
func HandOutPorts(pick func(n int) ([]int, error)) (restore func()) {
	pickPorts = pick
	return func() { pickPorts = freePorts }
}

// FreePorts is the harness's own choice of n distinct free ports.
var FreePorts = freePorts
