// Just enough of UnityEditor for mcs to compile the package's UNITY_EDITOR code outside Unity
// (tests/test_unity_package.py). Never shipped; the signatures match UnityEditor's, and the Raise*
// methods (not UnityEditor's) let the scenario play the editor's part.

using System;

namespace UnityEditor
{
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class InitializeOnLoadMethodAttribute : Attribute { }

    public enum PlayModeStateChange { EnteredEditMode, ExitingEditMode, EnteredPlayMode, ExitingPlayMode }

    public static class EditorApplication
    {
        public static event Action<PlayModeStateChange> playModeStateChanged;
        public static event Action quitting;

        public static void RaisePlayModeStateChanged(PlayModeStateChange state)
        {
            var handler = playModeStateChanged;
            if (handler != null) handler(state);
        }

        public static void RaiseQuitting() { var q = quitting; if (q != null) q(); }
    }

    public static class AssemblyReloadEvents
    {
        public delegate void AssemblyReloadCallback();
        public static event AssemblyReloadCallback beforeAssemblyReload;

        public static void RaiseBeforeAssemblyReload()
        {
            var handler = beforeAssemblyReload;
            if (handler != null) handler();
        }
    }
}
