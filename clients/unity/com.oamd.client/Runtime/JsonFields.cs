// JsonFields: lenient readers of parsed JSON objects for the typed results. A missing or differently typed
// member reads as the default, so a daemon that adds fields (or omits optional ones) never breaks a game.

using System;
using System.Collections.Generic;

namespace Oamd
{
    static class JsonFields
    {
        public static object Get(IDictionary<string, object> o, string key)
        {
            object v;
            return o != null && o.TryGetValue(key, out v) ? v : null;
        }

        public static string String(IDictionary<string, object> o, string key)
        {
            return Get(o, key) as string;
        }

        public static long Long(IDictionary<string, object> o, string key)
        {
            object v = Get(o, key);
            if (v is long) return (long)v;
            if (v is double) return (long)(double)v;
            return 0;
        }

        public static bool Bool(IDictionary<string, object> o, string key)
        {
            object v = Get(o, key);
            return v is bool && (bool)v;
        }

        public static Dictionary<string, object> Object(IDictionary<string, object> o, string key)
        {
            return Get(o, key) as Dictionary<string, object> ?? new Dictionary<string, object>();
        }

        public static List<object> List(IDictionary<string, object> o, string key)
        {
            return Get(o, key) as List<object> ?? new List<object>();
        }

        public static List<string> Strings(IDictionary<string, object> o, string key)
        {
            var strings = new List<string>();
            foreach (var item in List(o, key))
                if (item is string) strings.Add((string)item);
            return strings;
        }

        public static List<T> Objects<T>(IDictionary<string, object> o, string key, Func<Dictionary<string, object>, T> read)
        {
            var items = new List<T>();
            foreach (var item in List(o, key))
                if (item is Dictionary<string, object>) items.Add(read((Dictionary<string, object>)item));
            return items;
        }

        /// <summary>Adds <paramref name="value"/> unless it is null: absent and null differ for some methods.</summary>
        public static Dictionary<string, object> Put(this Dictionary<string, object> o, string key, object value)
        {
            if (value != null) o[key] = value;
            return o;
        }

        /// <summary>Copies caller-supplied extra members (protocol fields this API does not name).</summary>
        public static Dictionary<string, object> Merge(this Dictionary<string, object> o, IDictionary<string, object> extra)
        {
            if (extra != null)
                foreach (var kv in extra) o[kv.Key] = kv.Value;
            return o;
        }
    }
}
