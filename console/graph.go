package console

import "math"

// Graph is the roster's reachability drawn as SVG.
type Graph struct {
	W, H  int
	Nodes []Node
	Edges []Edge
}

// Node is a member on the graph.
type Node struct {
	Name  string
	X, Y  float64
	State string
	Entry bool
}

// Edge is a reach rule between two members; Active counts the calls in flight on it.
type Edge struct {
	From, To       string
	X1, Y1, X2, Y2 float64
	Active         int
}

// layoutGraph places the members on a circle (in a row for two), in roster order.
func layoutGraph(ms []MemberView, inflight map[string]int) Graph {
	g := Graph{W: 560, H: 300}
	n := len(ms)
	cy := 150.0
	if n <= 2 {
		g.H, cy = 150, 70
	}
	pos := map[string][2]float64{}
	for i, m := range ms {
		var x, y float64
		switch {
		case n == 1:
			x, y = 280, cy
		case n == 2:
			x, y = 140+float64(i)*280, cy
		default:
			a := -math.Pi/2 + 2*math.Pi*float64(i)/float64(n)
			x, y = 280+200*math.Cos(a), 150+110*math.Sin(a)
		}
		pos[m.Name] = [2]float64{x, y}
		g.Nodes = append(g.Nodes, Node{Name: m.Name, X: x, Y: y, State: m.State(), Entry: m.Entry})
	}
	for _, m := range ms {
		for _, to := range m.CanCall {
			a, b := pos[m.Name], pos[to]
			dx, dy := b[0]-a[0], b[1]-a[1]
			l := math.Hypot(dx, dy)
			if l == 0 {
				continue
			}
			// Start and end at the node's edge (radius 40), and keep the two directions of a pair apart.
			ux, uy := dx/l, dy/l
			ox, oy := -uy*6, ux*6
			g.Edges = append(g.Edges, Edge{From: m.Name, To: to,
				X1: a[0] + ux*42 + ox, Y1: a[1] + uy*42 + oy, X2: b[0] - ux*46 + ox, Y2: b[1] - uy*46 + oy,
				Active: inflight[m.Name+">"+to]})
		}
	}
	return g
}
