package org.json;
public class JSONObject {
    public JSONObject() {}
    public JSONObject(String json) throws JSONException { throw new UnsupportedOperationException("stub"); }
    public JSONObject put(String key, Object value) throws JSONException { return this; }
    public JSONObject put(String key, int value) throws JSONException { return this; }
    public JSONObject put(String key, long value) throws JSONException { return this; }
    public boolean has(String key) { return false; }
    public String optString(String key, String fallback) { return fallback; }
    public int optInt(String key) { return 0; }
    public int optInt(String key, int fallback) { return fallback; }
    public double optDouble(String key) { return 0; }
    public double optDouble(String key, double fallback) { return fallback; }
}
