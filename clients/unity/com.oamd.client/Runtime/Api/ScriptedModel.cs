// ScriptedModel: the protocol's scripted model ({"type": "scripted", "steps": [...]}), which plays fixed
// steps instead of generating. For tests, demos and offline play; any create call's `model` takes it.

using System.Collections.Generic;

namespace Oamd
{
    public sealed class ScriptedModel : IJsonValue
    {
        readonly List<object> _steps = new List<object>();
        Dictionary<string, object> _fallback;

        /// <summary>Answers <paramref name="text"/>.</summary>
        public ScriptedModel Text(string text)
        {
            return Step(new Dictionary<string, object> { { "text", text } });
        }

        /// <summary>Answers a JSON value (structured turns, NPC replies, decisions).</summary>
        public ScriptedModel Json(object value)
        {
            return Step(new Dictionary<string, object> { { "json", value } });
        }

        /// <summary>Calls one tool.</summary>
        public ScriptedModel ToolCall(string name, object arguments = null)
        {
            var call = new Dictionary<string, object> { { "name", name } }.Put("arguments", arguments);
            return Step(new Dictionary<string, object> { { "toolCalls", new List<object> { call } } });
        }

        /// <summary>Answers a template; <c>{toolOutput}</c> is the last tool's output.</summary>
        public ScriptedModel Template(string template)
        {
            return Step(new Dictionary<string, object> { { "template", template } });
        }

        /// <summary>Fails the step with error <paramref name="code"/> (a data.code, e.g. <c>guardrail_violation</c>).</summary>
        public ScriptedModel Error(string code)
        {
            return Step(new Dictionary<string, object> { { "error", code } });
        }

        /// <summary>Any step as the protocol spells it.</summary>
        public ScriptedModel Step(Dictionary<string, object> step)
        {
            _steps.Add(step);
            return this;
        }

        /// <summary>The step played once the script is used up.</summary>
        public ScriptedModel Fallback(Dictionary<string, object> step)
        {
            _fallback = step;
            return this;
        }

        public object ToJson()
        {
            return new Dictionary<string, object> { { "type", "scripted" }, { "steps", _steps } }.Put("fallback", _fallback);
        }
    }
}
