"""Small stdio proxies used to test the conformance runner itself."""
