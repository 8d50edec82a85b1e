package media

import (
	"encoding/binary"
	"math"
)

// wavHeaderBytes is the size of the canonical RIFF/WAVE header with one fmt
// chunk and the data chunk header.
const wavHeaderBytes = 44

// WAVHeader returns the canonical 44-byte RIFF/WAVE header of dataBytes of
// 16-bit little-endian mono PCM at sampleRate Hz, to be followed by the
// samples as they are.
func WAVHeader(sampleRate int, dataBytes int64) []byte {
	return wavHeader(sampleRate, uint32(36+dataBytes), uint32(dataBytes))
}

// WAVStreamHeader returns the 44-byte RIFF/WAVE header of a stream of
// 16-bit little-endian mono PCM at sampleRate Hz whose length is not known
// when it starts: the RIFF and data sizes are 0xFFFFFFFF, the largest a
// RIFF size can say, as OpenAI's text-to-speech streams WAV. Players and
// decoders that stream (browsers, ffmpeg) read such a file to its end;
// tools that trust the sizes see a file longer than it is.
func WAVStreamHeader(sampleRate int) []byte {
	return wavHeader(sampleRate, 0xFFFFFFFF, 0xFFFFFFFF)
}

// wavHeader writes the canonical header with the RIFF and data chunk sizes.
func wavHeader(sampleRate int, riffSize, dataSize uint32) []byte {
	b := make([]byte, wavHeaderBytes)
	copy(b[0:], "RIFF")
	binary.LittleEndian.PutUint32(b[4:], riffSize)
	copy(b[8:], "WAVE")
	copy(b[12:], "fmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)                   // fmt chunk size
	binary.LittleEndian.PutUint16(b[20:], 1)                    // PCM
	binary.LittleEndian.PutUint16(b[22:], 1)                    // channels
	binary.LittleEndian.PutUint32(b[24:], uint32(sampleRate))   // sample rate
	binary.LittleEndian.PutUint32(b[28:], uint32(sampleRate*2)) // byte rate
	binary.LittleEndian.PutUint16(b[32:], 2)                    // block align
	binary.LittleEndian.PutUint16(b[34:], 16)                   // bits per sample
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], dataSize)
	return b
}

// encodeWAV returns pcm (nominally in [-1, 1]) as a RIFF WAVE file: PCM,
// mono, 16-bit, SampleRate Hz. Values outside [-1, 1] are clipped.
func encodeWAV(pcm []float64) []byte {
	dataBytes := 2 * len(pcm)
	b := append(WAVHeader(SampleRate, int64(dataBytes)), make([]byte, dataBytes)...)
	for i, v := range pcm {
		s := math.Round(math.Max(-1, math.Min(1, v)) * 32767)
		binary.LittleEndian.PutUint16(b[wavHeaderBytes+2*i:], uint16(int16(s)))
	}
	return b
}
