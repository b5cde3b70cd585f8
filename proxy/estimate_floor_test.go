package proxy

import "testing"

// TestEstimateFloor: an upstream whose usage does not track the prompt (here 5,000 tokens
// reported for 400,000 characters) must not drive the estimate below chars/8, the fewest
// tokens the ratio's 1–8 bound allows. Before the floor, the 20,000-character view after a
// trim estimated -42,500 tokens, so "tokens saved" exceeded the request.
func TestEstimateFloor(t *testing.T) {
	t.Parallel()
	st := decodeTrimState(nil)
	st.thread("r").Sample = &usageSample{Chars: 400_000, Tokens: 5_000}
	for _, tt := range []struct {
		chars, want int
	}{
		{20_000, 2_500},    // formula: 5000 + ceil(-380000/8) = -42500
		{0, 0},             // nothing is no tokens, never negative
		{400_000, 50_000},  // the sample itself: formula 5000, floor 50000
		{800_000, 100_000}, // formula 5000 + 50000 = 55000 < floor
	} {
		if got := st.estimate("r", tt.chars, 2.5); got != tt.want {
			t.Errorf("estimate(%d chars) = %d, want %d", tt.chars, got, tt.want)
		}
	}
	// a sample that tracks the prompt keeps the seed's formula
	st.thread("r").Sample = &usageSample{Chars: 250_000, Tokens: 100_000}
	if got, want := st.estimate("r", 200_000, 2.5), 100_000-50_000*2/5; got != want {
		t.Errorf("calibrated estimate = %d, want %d", got, want)
	}
}
