package media

import "math"

// rng is splitmix64: small, fast and fully determined by its seed. Each call
// of the synthesisers owns one, so the package keeps no shared state.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// float returns a number in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// between returns a number in [lo, hi).
func (r *rng) between(lo, hi float64) float64 { return lo + (hi-lo)*r.float() }

// intn returns a number in [0, n); n must be positive.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// noise returns white noise in [-1, 1).
func (r *rng) noise() float64 { return 2*r.float() - 1 }

// peakLevel is the level that synthesised audio is normalised to (-3 dBFS):
// loud enough to hear, with headroom for the MP3 encoder's quantisation.
const peakLevel = 0.7

func midiFreq(note float64) float64 { return 440 * math.Exp2((note-69)/12) }

// tone adds a note with up to three harmonics (weights h1, h2, h3) to
// out[start:start+length], shaped by a linear attack, an exponential decay with
// time constant tau and a short release so that notes never click.
// Frequencies are in Hz and times in samples at SampleRate.
func tone(out []float64, start, length int, freq, amp, h1, h2, h3, attack, tau float64) {
	toneAt(out, SampleRate, start, length, freq, amp, h1, h2, h3, attack, tau)
}

// toneAt is tone for samples at rate Hz.
func toneAt(out []float64, rate float64, start, length int, freq, amp, h1, h2, h3, attack, tau float64) {
	end := min(start+length, len(out))
	if start < 0 || start >= end {
		return
	}
	d := 2 * math.Pi * freq / rate
	cd, sd := math.Cos(d), math.Sin(d)
	s, c := 0.0, 1.0 // sin and cos of the phase, advanced by rotation
	release := math.Min(0.01*rate, float64(length)/4)
	decay := math.Exp(-1 / tau)
	env := 1.0
	for i := start; i < end; i++ {
		t := float64(i - start)
		g := env
		if t < attack {
			g *= t / attack
		}
		if left := float64(length) - t; left < release {
			g *= left / release
		}
		v := h1*s + h2*2*s*c + h3*s*(3-4*s*s) // sin θ, sin 2θ, sin 3θ
		out[i] += amp * g * v
		s, c = s*cd+c*sd, c*cd-s*sd
		env *= decay
	}
}

// chirp adds a sine whose frequency glides exponentially from f0 to f1.
func chirp(out []float64, start, length int, f0, f1, amp, attack, tau float64) {
	end := min(start+length, len(out))
	if start < 0 || start >= end {
		return
	}
	ratio := math.Pow(f1/f0, 1/float64(length))
	f := f0
	phase := 0.0
	decay := math.Exp(-1 / tau)
	env := 1.0
	release := math.Min(0.01*SampleRate, float64(length)/4)
	for i := start; i < end; i++ {
		t := float64(i - start)
		g := env
		if t < attack {
			g *= t / attack
		}
		if left := float64(length) - t; left < release {
			g *= left / release
		}
		out[i] += amp * g * math.Sin(phase)
		phase += 2 * math.Pi * f / SampleRate
		if phase > 2*math.Pi {
			phase -= 2 * math.Pi
		}
		f *= ratio
		env *= decay
	}
}

// noiseBurst adds white noise through a one-pole low-pass whose cutoff moves
// from fc0 to fc1 (Hz). shape selects the envelope: a decay with time
// constant tau (percussive) or, when tau is 0, a raised-cosine swell (whoosh).
// highpass differentiates the noise first, for hi-hats.
func noiseBurst(out []float64, r *rng, start, length int, fc0, fc1, amp, tau float64, highpass bool) {
	end := min(start+length, len(out))
	if start < 0 || start >= end {
		return
	}
	var y, prev float64
	decay := 1.0
	if tau > 0 {
		decay = math.Exp(-1 / tau)
	}
	env := 1.0
	// The filter coefficient moves linearly between the two cutoffs' values.
	a0 := 1 - math.Exp(-2*math.Pi*fc0/SampleRate)
	a1 := 1 - math.Exp(-2*math.Pi*fc1/SampleRate)
	for i := start; i < end; i++ {
		t := float64(i-start) / float64(length)
		a := a0 + (a1-a0)*t
		x := r.noise()
		if highpass {
			x, prev = x-prev, x
		}
		y += a * (x - y)
		g := env
		if tau == 0 {
			g = 0.5 - 0.5*math.Cos(2*math.Pi*t)
		} else if t < 0.005 {
			g *= t / 0.005
		}
		out[i] += amp * g * y
		env *= decay
	}
}

// synthMusic returns n samples of a melody over a bass line and, for most
// seeds, a drum pattern: key, scale, tempo, chords and tune all follow from
// the seed.
func synthMusic(seed uint64, n int) []float64 {
	r := rng{s: seed}
	out := make([]float64, n)
	scales := [][]int{
		{0, 2, 4, 5, 7, 9, 11}, // major
		{0, 2, 3, 5, 7, 8, 10}, // natural minor
		{0, 2, 3, 5, 7, 9, 10}, // dorian
		{0, 2, 4, 7, 9},        // major pentatonic
		{0, 3, 5, 7, 10},       // minor pentatonic
	}
	scale := scales[r.intn(len(scales))]
	steps := len(scale)
	pitch := func(degree int) float64 {
		oct := int(math.Floor(float64(degree) / float64(steps)))
		return float64(12*oct + scale[degree-oct*steps])
	}
	root := 57.0 + float64(r.intn(12)) // A3 to G#4
	bpm := 84 + r.intn(57)
	beat := 60 / float64(bpm) * SampleRate
	progressions := [][4]int{{0, 4, 5, 3}, {0, 3, 4, 0}, {0, 5, 3, 4}, {0, 0, 3, 4}, {5, 3, 0, 4}}
	prog := progressions[r.intn(len(progressions))]
	drums := r.intn(10) < 7
	h2, h3 := r.between(0.1, 0.5), r.between(0.05, 0.3) // melody timbre

	bars := int(float64(n)/(4*beat)) + 1
	degree := steps // one octave above the root
	for bar := 0; bar < bars; bar++ {
		chord := prog[bar%4] % steps
		barStart := float64(bar) * 4 * beat
		// Bass: root and fifth of the chord, two octaves below the melody.
		for b := 0; b < 4; b++ {
			d := chord - steps
			if b%2 == 1 {
				d += min(4, steps-1)
			}
			tone(out, int(barStart+float64(b)*beat), int(0.9*beat), midiFreq(root-12+pitch(d)),
				0.32, 1, 0.3, 0, 0.005*SampleRate, 0.35*SampleRate)
		}
		if drums {
			for b := 0; b < 4; b++ {
				at := int(barStart + float64(b)*beat)
				if b%2 == 0 {
					chirp(out, at, int(0.3*SampleRate), 120, 45, 0.6, 0.002*SampleRate, 0.12*SampleRate)
				} else {
					noiseBurst(out, &r, at, int(0.2*SampleRate), 5000, 2000, 0.35, 0.06*SampleRate, false)
					tone(out, at, int(0.15*SampleRate), 185, 0.15, 1, 0, 0, 0.001*SampleRate, 0.04*SampleRate)
				}
				noiseBurst(out, &r, at+int(beat/2), int(0.06*SampleRate), 9000, 9000, 0.25, 0.015*SampleRate, true)
			}
		}
		// Melody: a random walk on the scale that lands on a chord tone at
		// the start of each bar.
		for t := 0.0; t < 4; {
			durs := []float64{0.5, 0.5, 1, 1, 1.5, 2}
			dur := math.Min(durs[r.intn(len(durs))], 4-t)
			if t == 0 {
				degree = steps + chord + 2*r.intn(3) // root, third or fifth
			} else {
				degree += r.intn(5) - 2
				degree = min(max(degree, steps-2), 2*steps+2)
			}
			if r.intn(100) >= 12 { // otherwise a rest
				tone(out, int(barStart+t*beat), int(dur*beat*0.95), midiFreq(root+pitch(degree)),
					0.3, 1, h2, h3, 0.01*SampleRate, (0.3+0.4*dur)*SampleRate)
			}
			t += dur
		}
	}
	normalize(out)
	return out
}

// synthSFX returns n samples of sound effects back to back: beeps, laser-like
// sweeps, filtered noise impacts, whooshes and pick-up arpeggios.
func synthSFX(seed uint64, n int) []float64 {
	r := rng{s: seed}
	out := make([]float64, n)
	sec := func(s float64) int { return int(s * SampleRate) }
	fsec := func(s float64) float64 { return s * SampleRate }
	at := sec(0.02)
	for at < n {
		var length int
		switch r.intn(5) {
		case 0: // beeps
			f := r.between(300, 2000)
			l := r.between(0.08, 0.3)
			reps := 1 + r.intn(3)
			for k := 0; k < reps; k++ {
				tone(out, at+k*sec(l*1.4), sec(l), f, 0.5, 1, 0, 0.33, fsec(0.002), fsec(l/2))
			}
			length = reps * sec(l*1.4)
		case 1: // sweep
			f0 := r.between(200, 3000)
			f1 := f0 * math.Exp2(r.between(1, 3)*float64(1-2*r.intn(2)))
			length = sec(r.between(0.2, 1.2))
			chirp(out, at, length, f0, f1, 0.5, fsec(0.005), float64(length)/2)
		case 2: // impact
			length = sec(r.between(0.3, 1.5))
			fc := r.between(200, 4000)
			noiseBurst(out, &r, at, length, fc, fc/4, 0.9, float64(length)/4, false)
			chirp(out, at, length/2, 90, 40, 0.5, fsec(0.002), float64(length)/6)
		case 3: // whoosh
			length = sec(r.between(0.4, 1.5))
			noiseBurst(out, &r, at, length, r.between(300, 1000), r.between(2000, 6000), 1.2, 0, false)
		default: // pick-up arpeggio
			base := 72 + float64(r.intn(12))
			notes := 3 + r.intn(3)
			for k := 0; k < notes; k++ {
				tone(out, at+k*sec(0.06), sec(0.12), midiFreq(base+float64(4*k)), 0.35, 1, 0.2, 0, fsec(0.002), fsec(0.05))
			}
			length = notes*sec(0.06) + sec(0.06)
		}
		at += length + sec(r.between(0.05, 0.3))
	}
	normalize(out)
	return out
}

// normalize scales out to peakLevel and fades the first and last 10 ms so the
// clip starts and ends without a click.
func normalize(out []float64) {
	var peak float64
	for _, v := range out {
		peak = math.Max(peak, math.Abs(v))
	}
	if peak == 0 {
		return
	}
	g := peakLevel / peak
	for i := range out {
		out[i] *= g
	}
	fade := min(len(out)/2, SampleRate/100)
	for i := 0; i < fade; i++ {
		w := float64(i) / float64(fade)
		out[i] *= w
		out[len(out)-1-i] *= w
	}
}
