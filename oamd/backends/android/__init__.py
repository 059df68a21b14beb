"""The Android backends through pyjnius: Gemini Nano by ML Kit and LiteRT-LM, on the JVM seam they share (jvm), with their prompt and error-code helpers."""
