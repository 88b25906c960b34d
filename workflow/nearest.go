package workflow

import "github.com/agnivade/levenshtein"

// Nearest returns the candidate nearest to a name (fewest edits; the
// first of equals), "" when there is none: for errors that say what was
// meant.
func Nearest(name string, candidates []string) string {
	best, dist := "", -1
	for _, c := range candidates {
		if d := levenshtein.ComputeDistance(name, c); dist < 0 || d < dist {
			best, dist = c, d
		}
	}
	return best
}
