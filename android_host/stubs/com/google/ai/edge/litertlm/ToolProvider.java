package com.google.ai.edge.litertlm;
public interface ToolProvider {}
